"""What a sweep varies: every combination of --grid's values, or one element per line of
--settings_file; each element named by its settings."""

from __future__ import annotations

import dataclasses
import itertools
import re
import shlex
from collections.abc import Sequence
from pathlib import Path

from tfdist.errors import ConfigError


@dataclasses.dataclass(frozen=True)
class Element:
    index: int
    settings: tuple[tuple[str, str], ...]  # (flag, value) in the sweep's order

    @property
    def name(self) -> str:
        """Readable and stable: "lr=0.1,batch_size=32"; the element's run directory's name."""
        return ",".join(f"{k}={_path_safe(v)}" for k, v in self.settings) or "default"

    @property
    def args(self) -> list[str]:
        return [f"--{k}={v}" for k, v in self.settings]


def _path_safe(value: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.+-]", "_", value)


def parse_grid(text: str) -> list[dict[str, str]]:
    """--grid="lr=0.01,0.1;batch_size=32,64": every combination, the last setting varying
    fastest."""
    axes = []
    for part in filter(None, (p.strip() for p in text.split(";"))):
        name, sep, values = part.partition("=")
        name = name.strip().lstrip("-")
        listed = [v.strip() for v in values.split(",") if v.strip()]
        if not sep or not name or not listed:
            raise ConfigError(f"--grid: {part!r} is not NAME=VALUE[,VALUE...]; e.g. "
                              "--grid='lr=0.01,0.1;batch_size=32,64'.")
        axes.append((name, listed))
    if not axes:
        raise ConfigError("--grid is empty; e.g. --grid='lr=0.01,0.1;batch_size=32,64'.")
    names = [n for n, _ in axes]
    if len(set(names)) != len(names):
        raise ConfigError(f"--grid names a setting twice: {', '.join(names)}.")
    return [dict(zip(names, combo)) for combo in itertools.product(*(v for _, v in axes))]


def parse_settings_file(path: str) -> list[dict[str, str]]:
    """One element per line: flags, e.g. `--lr=0.1 --batch_size=32` (blank lines and # comments
    skipped)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as e:
        raise ConfigError(f"--settings_file={path}: {e.strerror}.") from None
    elements = []
    for number, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        settings = {}
        for token in shlex.split(line):
            name, sep, value = token.lstrip("-").partition("=")
            if not token.startswith("--") or not sep or not name:
                raise ConfigError(f"{path}:{number}: {token!r} is not --NAME=VALUE.")
            settings[name] = value
        elements.append(settings)
    if not elements:
        raise ConfigError(f"--settings_file={path} lists no settings (one line of flags each).")
    return elements


def elements_of(settings: Sequence[dict[str, str]]) -> list[Element]:
    elements = [Element(i, tuple(s.items())) for i, s in enumerate(settings)]
    names = [e.name for e in elements]
    twice = sorted({n for n in names if names.count(n) > 1})
    if twice:
        raise ConfigError(f"The sweep lists the same settings more than once: {', '.join(twice)}.")
    return elements
