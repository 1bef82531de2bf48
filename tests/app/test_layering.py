"""The `tfdist train` application (tfdist.app) is built on the library, never the reverse: no
module outside tfdist/app/ and tfdist/cli/ imports it (read from the sources, nothing imported)."""

import ast
from pathlib import Path

import tfdist

PACKAGE = Path(tfdist.__file__).parent
ABOVE = ("app", "cli")  # the application, and the command line that runs it


def imported(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def test_the_library_never_imports_the_application():
    below = [p for p in PACKAGE.rglob("*.py") if p.relative_to(PACKAGE).parts[0] not in ABOVE]
    assert any(p.parts[-2] == "train" for p in below)
    offenders = {
        str(p.relative_to(PACKAGE)): sorted(n for n in imported(p) if n.startswith("tfdist.app"))
        for p in below
    }
    assert {p: n for p, n in offenders.items() if n} == {}
