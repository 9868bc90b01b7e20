"""The chooser picks the right core, and the stub matches the pure twin."""

from __future__ import annotations

import ast
import dataclasses
import importlib.util
import inspect
import os
import subprocess
import sys
import types
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import navi_core
import navi_core._core_py as twin
import navi_core.core

ROOT = Path(__file__).resolve().parent.parent.parent
STUB = Path(navi_core.__file__).parent / "_core.pyi"
TRUTHY = {"1", "true", "yes", "on"}


def implementation(**env: str) -> str:
    """``IMPLEMENTATION`` as a fresh interpreter sees it under ``env``."""
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    result = subprocess.run(
        [sys.executable, "-c", "import navi_core.core as c; print(c.IMPLEMENTATION)"],
        env={**clean, **env},
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return result.stdout.strip()


@pytest.mark.parametrize("value", ["1", "true", "YES", " on "])
def test_pure_flag_picks_the_twin(value: str) -> None:
    assert implementation(NAVI_CORE_PURE=value) == "python"


def test_default_picks_the_extension_when_built() -> None:
    if importlib.util.find_spec("navi_core._core") is None:
        pytest.skip("compiled core not built")
    assert implementation() == "cython"
    assert implementation(NAVI_CORE_PURE="0") == "cython"


def test_required_extension_is_loaded() -> None:
    """Fails (never skips) when NAVI_CORE_REQUIRE_EXTENSION is set and the twin loaded."""
    if os.environ.get("NAVI_CORE_REQUIRE_EXTENSION", "").strip().lower() not in TRUTHY:
        pytest.skip("NAVI_CORE_REQUIRE_EXTENSION is not set")
    assert navi_core.core.IMPLEMENTATION == "cython", "the compiled core did not load"


def test_the_requirement_check_fails_with_the_twin() -> None:
    clean = {k: v for k, v in os.environ.items() if not k.startswith("NAVI_CORE_")}
    env = {**clean, "NAVI_CORE_PURE": "1", "NAVI_CORE_REQUIRE_EXTENSION": "1"}
    test = f"{Path(__file__).relative_to(ROOT)}::test_required_extension_is_loaded"
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 1, result.stdout[-2000:]
    assert "the compiled core did not load" in result.stdout


def test_the_core_facade_exports_the_twin_names() -> None:
    assert set(navi_core.core.__all__) == {
        *twin.__all__,
        "IMPLEMENTATION",
        "EXTENSION_ERROR",
        "REQUIRE_EXTENSION",
        "ExtensionFallbackWarning",
    }


def test_the_compiled_core_exports_the_twin_names() -> None:
    """The twin's ``__all__`` is the one list: the compiled core has every name of it,
    keeps no list of its own, and defines nothing public beyond it but the mirrored
    internals of the twin's modules; the facade takes each name from it."""
    try:
        import navi_core._core as compiled
    except ImportError as exc:
        pytest.skip(f"compiled core not built: {exc}")
    assert compiled.__file__.endswith((".so", ".pyd"))
    assert not hasattr(compiled, "__all__")
    missing = [name for name in twin.__all__ if not hasattr(compiled, name)]
    assert not missing
    assert compiled.SSEDecoder is not twin.SSEDecoder  # type: ignore[comparison-overlap]
    own = {
        name
        for name, obj in vars(compiled).items()
        if not name.startswith("_")
        and getattr(obj, "__module__", None) == compiled.__name__
    }
    modules = {sys.modules[getattr(twin, name).__module__] for name in twin.__all__}
    internals = {
        name
        for module in modules
        for name, obj in vars(module).items()
        if not name.startswith("_")
        and getattr(obj, "__module__", None) == module.__name__
    } - set(twin.__all__)
    assert own - set(twin.__all__) <= internals
    if navi_core.core.IMPLEMENTATION == "cython":
        for name in twin.__all__:
            assert getattr(navi_core.core, name) is getattr(compiled, name), name


class _Unalias(ast.NodeTransformer):
    def __init__(self, aliases: Mapping[str, str]) -> None:
        self.aliases = aliases

    def visit_Name(self, node: ast.Name) -> ast.expr:
        if node.id in self.aliases:
            return ast.parse(self.aliases[node.id], mode="eval").body
        return node


def _normal(annotation: str, aliases: Mapping[str, str]) -> str:
    """``annotation`` with type aliases spelled out, as text."""
    return ast.unparse(_Unalias(aliases).visit(ast.parse(annotation, mode="eval")))


def _stub_aliases() -> dict[str, str]:
    """The stub's ``Name: TypeAlias = ...`` definitions."""
    return {
        node.target.id: ast.unparse(node.value)
        for node in ast.parse(STUB.read_text()).body
        if isinstance(node, ast.AnnAssign)
        and isinstance(node.target, ast.Name)
        and ast.unparse(node.annotation) == "TypeAlias"
        and node.value is not None
    }


def _module_aliases(obj: Any) -> dict[str, str]:
    """The type aliases in the globals of the module that defines ``obj``."""
    namespace = vars(sys.modules[obj.__module__])
    return {
        name: str(value).replace("typing.", "")
        for name, value in namespace.items()
        if isinstance(value, types.UnionType | types.GenericAlias)
    }


def _stub_signature(fn: ast.FunctionDef, method: bool) -> list[Any]:
    aliases = _stub_aliases()

    def text(node: ast.expr | None) -> str | None:
        return None if node is None else _normal(ast.unparse(node), aliases)

    args = fn.args
    params = args.posonlyargs + args.args
    if method:
        params = params[1:]  # self
    defaults = [None] * (len(params) - len(args.defaults)) + list(args.defaults)
    shape = [
        (p.arg, text(p.annotation), None if d is None else ast.literal_eval(d))
        for p, d in zip(params, defaults, strict=True)
    ]
    return [*shape, ("return", text(fn.returns), None)]


def _twin_signature(obj: Any) -> list[Any]:
    sig = inspect.signature(obj)
    empty = inspect.Parameter.empty
    aliases = _module_aliases(obj)

    def text(annotation: Any) -> str | None:
        if annotation is empty:
            return None
        return _normal(str(annotation), aliases)

    shape = [
        (p.name, text(p.annotation), None if p.default is empty else p.default)
        for p in sig.parameters.values()
    ]
    return [*shape, ("return", text(sig.return_annotation), None)]


def _stub() -> dict[str, ast.stmt]:
    tree = ast.parse(STUB.read_text())
    return {
        node.name: node
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.ClassDef)
    }


def test_stub_names_match_the_twin() -> None:
    """The stub defines exactly the twin's names and keeps no list of them."""
    tree = ast.parse(STUB.read_text())
    assert not [
        node
        for node in tree.body
        if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign)
        and "__all__" in ast.unparse(node)
    ]
    assert set(_stub()) == set(twin.__all__)


@pytest.mark.parametrize("name", ["estimate_tokens", "b64encode"])
def test_stub_function_signatures(name: str) -> None:
    node = _stub()[name]
    assert isinstance(node, ast.FunctionDef)
    assert _stub_signature(node, method=False) == _twin_signature(getattr(twin, name))


@pytest.mark.parametrize("name", ["SSEDecoder", "OpenAIChatParser", "AnthropicParser"])
def test_stub_class_signatures(name: str) -> None:
    node = _stub()[name]
    assert isinstance(node, ast.ClassDef)
    methods = {f.name: f for f in node.body if isinstance(f, ast.FunctionDef)}
    cls = getattr(twin, name)
    public = {m for m in vars(cls) if not m.startswith("_")} | {"__init__"}
    public |= {
        m for base in cls.__mro__[1:-1] for m in vars(base) if m in {"feed", "close"}
    }
    assert set(methods) == public
    for method, fn in methods.items():
        expected = _twin_signature(getattr(cls, method))
        assert expected[0][0] == "self"
        assert _stub_signature(fn, method=True) == expected[1:]


def test_stub_event_matches_the_twin_dataclass() -> None:
    node = _stub()["SSEEvent"]
    assert isinstance(node, ast.ClassDef)
    props = [
        (f.name, f.returns and ast.unparse(f.returns))
        for f in node.body
        if isinstance(f, ast.FunctionDef) and f.name != "__init__"
    ]
    fields = [(f.name, f.type) for f in dataclasses.fields(twin.SSEEvent)]
    assert props == fields
    (init,) = [
        f for f in node.body if isinstance(f, ast.FunctionDef) and f.name == "__init__"
    ]
    assert _stub_signature(init, method=True) == [
        *_twin_signature(twin.SSEEvent)[:-1],
        ("return", "None", None),
    ]
