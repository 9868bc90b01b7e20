"""The package's structure: who may import whom, and who may read what.

* No module reads another object's private names, compiled core included (the core's
  ``.pyx``/``.pxi`` sources are read too); there is no allow-list.
* No import cycle, no import of a higher layer (``LAYERS``) or of a module's own
  package from inside it: the arrows run one way, down.
* The top of ``navi_core/`` keeps the public face and the values a user holds.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "navi_core"
CSRC = PACKAGE.parent / "csrc"

#: private-looking names that are public API of the standard library
STDLIB_API = {"_replace", "_asdict", "_fields", "_make", "_field_defaults"}
#: modules at the top of the package, at most
MAX_TOP = 35
#: the layers, lowest first; a module imports (at run time) only from its own layer
#: or a lower one. Each name is a top-level module or subpackage of ``navi_core``.
LAYERS = (
    # values and the core: what everything else is made of
    {
        "_ids", "_deltas", "_payloads", "_secrets", "_logs", "_interrupt", "_history",
        "_extras",
        "errors", "conversation", "events", "config", "tokens", "codec", "core",
        "_core_py", "_assemble_py", "_framing_py", "_pump_py", "_responses_py",
        "_gil_py", "_sse_py", "_text_py",
    },
    # the parts a turn is made of
    {"tools", "media", "output", "providers", "store", "hooks", "subscribe", "mcp"},
    # one turn's machinery and the conversation it writes
    {"session", "approvals", "compaction", "_turn"},
    # the public face
    {"stream", "agent", "subagent", "testing", "tracing", ""},
    # the programs built on it
    {"cli", "serve", "__main__"},
)  # fmt: skip


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


def type_checking_nodes(tree: ast.AST) -> set[int]:
    """ids of the nodes inside ``if TYPE_CHECKING:`` blocks (never run)."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for stmt in node.body:
                out.update(id(n) for n in ast.walk(stmt))
    return out


def imports(
    name: str, path: Path, runtime_only: bool = False
) -> Iterator[tuple[str, ast.AST, str | None]]:
    """(imported module, node, imported name or None) for every import, nested too;
    ``runtime_only`` leaves out those under ``if TYPE_CHECKING:``."""
    tree = ast.parse(path.read_text(), str(path))
    skip = type_checking_nodes(tree) if runtime_only else set()
    for node in ast.walk(tree):
        if id(node) in skip:
            continue
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


def private_reads(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if not isinstance(node, ast.Attribute) or not private(node.attr):
            continue
        if node.attr in STDLIB_API:
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        found.append(f"{path.name}:{node.lineno}: .{node.attr}")
    return found


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_reads_private_attributes_of_other_objects(name: str) -> None:
    assert private_reads(MODULES[name]) == []


#: ``name._attr`` in Cython source, where ``name`` is not ``self``; ``<Type>name``
#: casts and C-level ``_helpers`` of the core's own are not attribute reads
CYTHON_READ = re.compile(r"(?<![\w.])(?!self\b)([A-Za-z_]\w*)\.(_[A-Za-z]\w*)\b")


@pytest.mark.parametrize("source", sorted(p.name for p in CSRC.glob("*.p*")))
def test_the_compiled_core_reads_no_private_names_of_other_objects(source: str) -> None:
    text = (CSRC / source).read_text()
    text = re.sub(r'"""(.*?)"""', "", text, flags=re.S)  # docstrings and comments
    code = "\n".join(line.split("#", 1)[0] for line in text.splitlines())
    found = [
        f"{source}: {m.group(0)}"
        for m in CYTHON_READ.finditer(code)
        if not m.group(2).startswith("__")
        and m.group(1) != "navi_core"
        and not code.startswith("(self", m.end())  # Base._method(self, ...): super
    ]
    assert found == []


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_module_imports_private_names(name: str) -> None:
    bad = [
        f"{target}.{imported}"
        for target, _, imported in imports(name, MODULES[name])
        if imported is not None and private(imported) and target != name
    ]
    assert bad == []


def test_the_top_of_the_package_stays_small() -> None:
    top = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(top) <= MAX_TOP, top


def unit(module: str) -> str:
    """The top-level module or subpackage of ``navi_core`` a module belongs to."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def layer(module: str) -> int:
    name = unit(module)
    for i, names in enumerate(LAYERS):
        if name in names:
            return i
    raise AssertionError(f"{module}: add {name!r} to a layer of LAYERS")


@pytest.mark.parametrize("name", sorted(MODULES))
def test_no_import_runs_back_up(name: str) -> None:
    mine = layer(name)
    package = name if MODULES[name].name == "__init__.py" else name.rpartition(".")[0]
    bad = []
    for target, _node, _ in imports(name, MODULES[name], runtime_only=True):
        if target not in MODULES or target == name:
            continue
        if layer(target) > mine:
            bad.append(f"{target} (layer {layer(target)} > {mine})")
        elif (
            target != "navi_core"
            and (package + ".").startswith(target + ".")
            and target != package
        ):
            bad.append(f"{target} (a package above {name})")
        elif target == package and MODULES[name].name != "__init__.py":
            bad.append(f"{target} (its own package's __init__)")
    assert bad == []


def test_the_layers_name_every_part_of_the_package() -> None:
    named = set().union(*LAYERS)
    assert {unit(m) for m in MODULES} <= named
    assert sum(len(names) for names in LAYERS) == len(named)  # each in one layer


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
    assert navi_core.ToolSpec is tools.ToolSpec
