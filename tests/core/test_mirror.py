"""The twins mirror file for file and name for name.

Each pure module has one include of the compiled core holding the same classes,
functions and methods under the same names; every other include says in its header
that it is a C-only fast path. The few names that exist on one side only are listed
here, each with its reason, so a new one is a decision and not an accident.
"""

from __future__ import annotations

import ast
import importlib
import inspect
import re
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parents[2]
CSRC = ROOT / "csrc"
PACKAGE = ROOT / "navi_core"
PAIRS = {
    "_framing_py": "_framing.pxi",
    "_sse_py": "_sse.pxi",
    "_responses_py": "_responses.pxi",
    "_text_py": "_text.pxi",
    "_assemble_py": "_assemble.pxi",
    "_pump_py": "_pump.pxi",
    "_gil_py": "_gil.pxi",
}
C_ONLY_HEADER = "# C-only fast path, no Python twin"

PY_ONLY = {
    "_framing_py": {
        "Framer._lf_lines",  # the twin's LF line loop; C walks lines with memchr
    },
    "_sse_py": {
        "_Template",  # the twin's fast path: templates learned from the reader
        "_learn",
    },
    "_responses_py": set(),
    "_assemble_py": set(),
    "_pump_py": set(),
    "_gil_py": {"_check"},  # the timeout's checks; C makes them in _wait
    "_text_py": {
        "_ascii_class",  # build the class tables; C copies the finished ones
        "_bmp_table",
    },
}
C_ONLY = {
    "_framing.pxi": {
        "Framer._past_eol",  # a CR at the end of a chunk, on pointers
        "_crlf",  # Dechunker's line search and hex digits on char pointers; the
        "_hex_digit",  # twin's are bytes.find and a regular expression
    },
    "_sse.pxi": {
        "Parser._fast",  # the byte scanner; the twin's template check is inline
        "AnthropicParser._of_bare",  # whether _fast leaves a thinking piece to the
        # reader; the twin's templates are learnt by that reader's generic path
    },
    "_responses.pxi": {
        "_responses_event",  # the byte scanner of the delta events
        "_echo",  # the events the scanner steps over
    },
    "_pump.pxi": {
        "_get",  # reads a slotted object's fields at their offsets; the twin reads
        "_is_none",  # them as attributes
        "Reader._enter",  # enter and leave as C calls inside a read; the twin's
        "Reader._leave",  # read calls enter and leave
    },
    "_gil.pxi": {
        "_wait",  # Signal.wait and hand_off in one, the GIL let go around the give;
        "_microseconds",  # the twin's are a lock's acquire
        "Signal.__dealloc__",  # frees the C lock
    },
    "_assemble.pxi": {
        "_Maker",  # events built with their slots set in place, not through __init__
        "_slot_offset",  # where a slot lies in an instance (also for _pump.pxi's reads)
    },
    "_text.pxi": {
        "_copy_table",  # the twin's tables into C arrays, at import
        "_load_tables",
        "_scan",  # the loop of estimate_tokens, once per code unit width
        "_scan_text",
        "_char_class",  # the twin's inline bmp[cp] / _astral_class(cp) per character
        "_tc_has_trigger",  # TextCalls' marker check; the twin's is inline
    },
}

_C_DEF = re.compile(
    r"^(?:cdef|cpdef)\s+(?!class\b|extern\b|enum\b|struct\b)[^=(]*?(\w+)\("
)
_C_CLASS = re.compile(r"^(?:cdef\s+)?class\s+(\w+)(?:\((\w+)\))?:")
_C_METHOD = re.compile(r"^ {4}(?:cdef|cpdef|def)\s+[^=(]*?(\w+)\(")
_C_IMPORT = re.compile(r"^from navi_core\.(\w+) import (?:\(([^)]*)\)|(.*))$", re.M)


def _py_side(module: str) -> tuple[set[str], dict[str, tuple[str | None, set[str]]]]:
    """Top-level functions and classes of a pure module; classes: (base, methods)."""
    tree = ast.parse((PACKAGE / f"{module}.py").read_text())
    names: set[str] = set()
    classes: dict[str, tuple[str | None, set[str]]] = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            names.add(node.name)
        elif isinstance(node, ast.ClassDef):
            names.add(node.name)
            bases = [b.id for b in node.bases if isinstance(b, ast.Name)]
            methods = {n.name for n in node.body if isinstance(n, ast.FunctionDef)}
            classes[node.name] = (bases[0] if bases else None, methods)
    return names, classes


def _c_side(pxi: str) -> tuple[set[str], dict[str, tuple[str | None, set[str]]]]:
    """Top-level functions and classes of an include, the same way."""
    names: set[str] = set()
    classes: dict[str, tuple[str | None, set[str]]] = {}
    current: str | None = None
    for line in (CSRC / pxi).read_text().splitlines():
        code = line.split("  #")[0]
        if code[:1] not in ("", " ", "#"):
            current = None
        if m := _C_CLASS.match(code):
            current = m.group(1)
            names.add(current)
            classes[current] = (m.group(2), set())
        elif current is not None and (m := _C_METHOD.match(code)):
            name = "__init__" if m.group(1) == "__cinit__" else m.group(1)
            classes[current][1].add(name)
        elif (m := _C_DEF.match(code)) or (m := re.match(r"^def\s+(\w+)\(", code)):
            names.add(m.group(1))
    return names, classes


def _c_imports(pxi: str, module: str) -> set[str]:
    """The names an include takes from its twin as they are (shared objects)."""
    text = (CSRC / pxi).read_text()
    return {
        name.strip()
        for source, listed, single in _C_IMPORT.findall(text)
        if source == module
        for name in (listed or single).split(",")
        if name.strip()
    }


def _all_methods(cls: str, classes: dict[str, tuple[str | None, set[str]]]) -> set[str]:
    """Methods of ``cls`` and of its bases among ``classes``."""
    out: set[str] = set()
    name: str | None = cls
    while name in classes:
        base, methods = classes[name]
        out |= methods
        name = base
    return out


def _every_class(side: str) -> dict[str, tuple[str | None, set[str]]]:
    """The classes of all pairs on one side: a base may live in another pair."""
    merged: dict[str, tuple[str | None, set[str]]] = {}
    for module, pxi in PAIRS.items():
        merged.update((_py_side(module) if side == "py" else _c_side(pxi))[1])
    return merged


def _split(one_sided: set[str]) -> tuple[set[str], set[str]]:
    """(functions and classes, methods) of a PY_ONLY or C_ONLY entry."""
    return (
        {n for n in one_sided if "." not in n},
        {n.partition(".")[2] for n in one_sided if "." in n},
    )


@pytest.mark.parametrize("path", sorted(CSRC.glob("*.pxi")), ids=lambda p: p.name)
def test_every_include_is_a_twin_or_says_it_is_c_only(path: Path) -> None:
    header = path.read_text().splitlines()[0]
    twins = {pxi: module for module, pxi in PAIRS.items()}
    if path.name in twins:
        assert f"navi_core/{twins[path.name]}.py" in header
        docstring = ast.get_docstring(
            ast.parse((PACKAGE / f"{twins[path.name]}.py").read_text())
        )
        assert docstring is not None and f"csrc/{path.name}" in docstring
    else:
        assert path.name.startswith("_fast_"), path.name
        assert header.startswith(C_ONLY_HEADER), header


@pytest.mark.parametrize(("module", "pxi"), PAIRS.items())
def test_functions_and_classes_mirror(module: str, pxi: str) -> None:
    py_names, _ = _py_side(module)
    c_names, _ = _c_side(pxi)
    shared = _c_imports(pxi, module) & py_names
    py_only, c_only = _split(PY_ONLY[module])[0], _split(C_ONLY[pxi])[0]
    assert py_names - py_only == (c_names | shared) - c_only
    assert not shared & c_names, "a shared name is also defined in C"


@pytest.mark.parametrize(("module", "pxi"), PAIRS.items())
def test_methods_mirror(module: str, pxi: str) -> None:
    py_classes, c_classes = _every_class("py"), _every_class("c")
    both = set(_py_side(module)[1]) & set(_c_side(pxi)[1])
    assert both or module in ("_text_py", "_pump_py", "_gil_py")
    py_only = _split(set().union(*PY_ONLY.values()))[1]  # inherited across pairs
    c_only = _split(set().union(*C_ONLY.values()))[1]
    for cls in sorted(both):
        py = _all_methods(cls, py_classes) - py_only
        c = _all_methods(cls, c_classes) - c_only
        assert py == c, cls


@pytest.mark.parametrize(("module", "pxi"), PAIRS.items())
def test_one_sided_names_exist(module: str, pxi: str) -> None:
    """An entry of PY_ONLY or C_ONLY names what is on that side and not the other."""
    sides = {"py": _py_side(module), "c": _c_side(pxi)}
    for side, entries in (("py", PY_ONLY[module]), ("c", C_ONLY[pxi])):
        names, classes = sides[side]
        other_names, other_classes = sides["c" if side == "py" else "py"]
        for entry in entries:
            cls, _, method = entry.rpartition(".")
            if cls:
                assert method in classes[cls][1], entry
                assert method not in other_classes.get(cls, (None, set()))[1], entry
            else:
                assert method in names and method not in other_names, entry


def _public_callables(module: ModuleType) -> dict[str, object]:
    return {
        name: obj
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and (inspect.isclass(obj) or inspect.isfunction(obj))
        and obj.__module__ == module.__name__
    }


@pytest.mark.cython
def test_public_names_exist_on_both_sides(
    both_cores: tuple[ModuleType, ModuleType],
) -> None:
    """Every public class and function of a twin module is on the compiled core
    (compiled under that name, or the very same object), and nothing else is."""
    compiled = both_cores[1]
    twins = [importlib.import_module(f"navi_core.{m}") for m in PAIRS]
    expected: dict[str, object] = {}
    for module in twins:
        expected.update(_public_callables(module))
    for name, obj in expected.items():
        assert hasattr(compiled, name), name
        theirs = getattr(compiled, name)
        if getattr(theirs, "__module__", None) != compiled.__name__:
            assert theirs is obj, name
    for name in dir(compiled):
        obj = getattr(compiled, name)
        if name.startswith("_") or getattr(obj, "__module__", None) is None:
            continue
        if obj.__module__ == compiled.__name__ or obj.__module__ in {
            m.__name__ for m in twins
        }:
            assert name in expected, name
