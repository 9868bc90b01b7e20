"""The package's structure: no module reads another's private names, no import cycles."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "navi_core"

#: private-looking names that are public API of the standard library
STDLIB_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
MAX_LINES = 400
#: the phase machine stays readable in one file, rules header and all
LONGER = {"navi_core.stream": 830}  # the whole phase machine and its control, by design
#: the twin of the core's hot path is the body of ``Stream`` and ``DeltaStream`` methods
#: (``next``, ``produce``) and of the ``Reader`` a stream keeps: the fields of theirs it
#: reads, as their own methods would
FRIENDS = {
    "navi_core._pump_py": {
        *("_response", "_queue", "_ctl", "_observers", "_read_ended"),  # Stream
        *("_batches", "_core", "_scrubbed", "_finish", "_ended", "_malformed"),
    },
}


def modules() -> dict[str, Path]:
    """Dotted module name -> file, for every module of the package."""
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE.parent).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


MODULES = modules()


def package_of(name: str, path: Path) -> str:
    return name if path.name == "__init__.py" else name.rpartition(".")[0]


def resolve(name: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module an ``ImportFrom`` names."""
    if node.level == 0:
        return node.module or ""
    base = package_of(name, path).split(".")
    if node.level > 1:
        base = base[: -(node.level - 1)]
    return ".".join([*base, *([node.module] if node.module else [])])


def imports(name: str, path: Path) -> Iterator[tuple[str, ast.AST, str | None]]:
    """(imported module, node, imported name or None) for every import, nested too."""
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield alias.name, node, None
        elif isinstance(node, ast.ImportFrom):
            target = resolve(name, path, node)
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                if sub in MODULES:
                    yield sub, node, None
                else:
                    yield target, node, alias.name


def private(attr: str) -> bool:
    return attr.startswith("_") and not attr.startswith("__")


def private_reads(path: Path, friends: frozenset[str] = frozenset()) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute) or not private(node.attr):
            continue
        if node.attr in STDLIB_API or node.attr in friends:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_reads_private_attributes_of_other_objects(name: str) -> None:
    assert private_reads(MODULES[name], frozenset(FRIENDS.get(name, ()))) == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_private_names(name: str) -> None:
    bad = [
        f"{target}.{imported}"
        for target, _, imported in imports(name, MODULES[name])
        if imported is not None and private(imported) and target != name
    ]
    assert bad == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_modules_stay_small(name: str) -> None:
    lines = len(MODULES[name].read_text().splitlines())
    assert lines <= LONGER.get(name, MAX_LINES), f"{name} has {lines} lines"


def import_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {m: set() for m in MODULES}
    for name, path in MODULES.items():
        for target, _, _ in imports(name, path):
            if target in MODULES and target != name:
                graph[name].add(target)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles_type_checking_imports_included() -> None:
    assert cycles(import_graph()) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_session_and_toolspec_live_where_the_design_says() -> None:
    import navi_core
    from navi_core import session, tools

    assert navi_core.Session is session.Session
    assert navi_core.ToolSpec.__module__ == tools.__name__
