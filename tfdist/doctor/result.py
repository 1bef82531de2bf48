"""One line of `tfdist doctor`: a check's name, its status and what to do."""

from __future__ import annotations

import dataclasses

OK, INFO, WARN, PROBLEM, SKIP = "ok", "info", "warn", "PROBLEM", "skip"


@dataclasses.dataclass(frozen=True)
class Result:
    check: str
    status: str  # OK, INFO, WARN, PROBLEM or SKIP
    message: str

    def line(self) -> str:
        return f"{self.status:<9}{self.check}: {self.message}"
