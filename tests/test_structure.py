"""The package's structure, read from its sources (no import): no import circle between tfdist's
modules, counting the imports inside functions too (a lazy import still ties two modules), and
the "which Keras" question asked only in tfdist.keras_compat."""

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tfdist"


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def modules() -> dict[str, Path]:
    return {module_name(p): p for p in PACKAGE.rglob("*.py")}


def imports(path: Path, known: dict[str, Path]) -> set[str]:
    """The tfdist modules `path` imports, anywhere in it: `from tfdist.a import b` is tfdist.a.b
    where that is a module, else tfdist.a."""
    found = set()
    for node in _nodes(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in names:
            if name.startswith("tfdist") and name in known:
                found.add(name)
    return found


def _nodes(tree: ast.AST):
    """Every node of `tree` but those under `if TYPE_CHECKING:` (read by type checkers only)."""
    for node in ast.iter_child_nodes(tree):
        test = node.test if isinstance(node, ast.If) else None
        if test is not None and "TYPE_CHECKING" in ast.unparse(test):
            yield from (n for orelse in node.orelse for n in [orelse, *_nodes(orelse)])
            continue
        yield node
        yield from _nodes(node)


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Each strongly connected set of more than one module (Tarjan), sorted."""
    index, low, stack, on_stack, found = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    for v in graph:
        if v not in index:
            visit(v)
    return found


def package_graph() -> dict[str, set[str]]:
    known = modules()
    graph = {name: imports(path, known) - {name} for name, path in known.items()}
    for name in graph:  # a package's __init__ is run by importing any of its modules, not a tie
        graph[name] = {m for m in graph[name] if not name.startswith(m + ".")}
    return graph


def test_no_import_circle():
    assert cycles(package_graph()) == []


def test_the_circle_finder_finds_one():
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_which_keras_is_asked_in_keras_compat_only():
    outside = [
        str(p.relative_to(PACKAGE.parent)) for p in PACKAGE.rglob("*.py")
        if "keras_compat" not in p.parts and "is_keras3" in p.read_text()
    ]
    assert outside == []
