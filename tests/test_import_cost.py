"""What ``import navi_core`` costs, and that loading each name on first use keeps the
public face whole.

* ``import navi_core`` loads none of httpx, httpcore, sqlite3, asyncio or orjson, and
  no navi_core module but the package itself: each public name's module loads when the
  name is first used.
* Every name of ``__all__``, when it is the first thing touched in a fresh interpreter
  (``from navi_core import X``), is the object ``navi_core.X`` gives, reports
  ``__module__ == "navi_core"`` and has type hints that resolve.
* Every public class reached first through the module ``navi_core`` imports it from
  for type checkers reports ``navi_core`` and has type hints that resolve (its module
  publishes it when it is imported), pydantic schemas included.
* ``dir(navi_core)`` and ``from navi_core import *`` give every public name, and the
  type checker's view (the ``TYPE_CHECKING`` imports) names each one.
* A class whose module ends while the module of a public class it names is still
  being imported gets that annotation resolved when the other module is done.

Each "fresh interpreter" is a child forked from a process that has only imported
navi_core, so one subprocess serves every name.
"""

from __future__ import annotations

import ast
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

import navi_core

INIT = Path(navi_core.__file__)
NAMES = list(navi_core.__all__)
#: what ``import navi_core`` must not load
HEAVY = ("httpx", "httpcore", "sqlite3", "_sqlite3", "asyncio", "orjson", "PIL")
#: the navi_core modules ``import navi_core`` may load (itself, and room for one more)
MAX_OWN_MODULES = 2
#: the optional extra a name needs
EXTRA = {"PostgresStore": "psycopg"}


def python(code: str, *args: str, env: dict[str, str] | None = None) -> str:
    """Run ``code`` in a fresh interpreter; its stdout."""
    done = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        cwd="/",
        env=env,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def type_checking_imports() -> dict[str, str]:
    """Public name -> the module ``navi_core/__init__.py`` imports it from for type
    checkers."""
    tree = ast.parse(INIT.read_text(encoding="utf-8"))
    out: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            for stmt in node.body:
                assert isinstance(stmt, ast.ImportFrom), ast.unparse(stmt)
                assert stmt.level == 1
                for alias in stmt.names:
                    out[alias.asname or alias.name] = f"navi_core.{stmt.module}"
    return out


#: each child gets one name: it touches it first, then reports what it found
FORKED = """
import json, os, sys, inspect, importlib, typing
import navi_core

def check(name, module):
    if module is None:
        space = {}
        exec(f"from navi_core import {name}", space)
        obj = space[name]
    else:
        obj = getattr(importlib.import_module(module), name)
    report = {"same": obj is getattr(navi_core, name)}
    if inspect.isclass(obj) or inspect.isfunction(obj):
        report["module"] = obj.__module__
    if inspect.isclass(obj):
        try:
            typing.get_type_hints(obj)
            report["hints"] = "ok"
        except Exception as exc:
            report["hints"] = f"{type(exc).__name__}: {exc}"
    return report

out = {}
for name, module in json.loads(sys.argv[1]):
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read)
        try:
            report = check(name, module)
        except BaseException as exc:
            report = {"error": f"{type(exc).__name__}: {exc}"}
        os.write(write, json.dumps(report).encode())
        os._exit(0)
    os.close(write)
    chunks = []
    while chunk := os.read(read, 65536):
        chunks.append(chunk)
    os.close(read)
    os.waitpid(pid, 0)
    out[name] = json.loads(b"".join(chunks))
print(json.dumps(out))
"""


def first_touch(pairs: list[tuple[str, str | None]]) -> dict[str, dict[str, Any]]:
    """For each (name, module): a fresh child of a process that imported navi_core
    only reaches the name first (``from navi_core import name`` when module is None,
    else through ``module``) and reports what it found."""
    return dict(json.loads(python(FORKED, json.dumps(pairs))))


needs_fork = pytest.mark.skipif(not hasattr(os, "fork"), reason="forks its children")


def available(name: str) -> bool:
    extra = EXTRA.get(name)
    if extra is None:
        return True
    import importlib.util

    return importlib.util.find_spec(extra) is not None


# -- what import navi_core costs ------------------------------------------------------


def test_import_navi_core_loads_nothing_heavy_and_no_module_of_its_names() -> None:
    out = python(
        "import sys\n"
        "import navi_core\n"
        f"print(sorted(m for m in {HEAVY!r} if m in sys.modules))\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] == 'navi_core'))\n"
        "print(sorted(n for n in navi_core.__all__ if n not in vars(navi_core)))\n"
    )
    heavy, own, unloaded = out.splitlines()
    assert heavy == "[]"
    assert len(eval(own)) <= MAX_OWN_MODULES, own
    assert eval(unloaded) == sorted(set(NAMES) - {"__version__"})


def test_pure_core_is_still_chosen_by_the_environment() -> None:
    env = {**os.environ, "NAVI_CORE_PURE": "1"}
    out = python(
        "import navi_core\n"
        "from navi_core import TextDelta\n"
        "from navi_core.core import IMPLEMENTATION\n"
        "print(IMPLEMENTATION)\n",
        env=env,
    )
    assert out == "python\n"


# -- every name, reached first ---------------------------------------------------------


@pytest.fixture(scope="module")
def through_navi_core() -> dict[str, dict[str, Any]]:
    return first_touch([(n, None) for n in NAMES if available(n)])


@pytest.fixture(scope="module")
def through_its_module() -> dict[str, dict[str, Any]]:
    where = type_checking_imports()
    return first_touch([(n, where[n]) for n in NAMES if n in where and available(n)])


@needs_fork
@pytest.mark.parametrize("name", NAMES)
def test_each_name_first_touched_through_navi_core_reports_navi_core(
    name: str, through_navi_core: dict[str, dict[str, Any]]
) -> None:
    if not available(name):
        pytest.skip(f"{name} needs {EXTRA[name]}")
    report = through_navi_core[name]
    assert "error" not in report, report
    assert report["same"]
    if "module" in report:
        assert report["module"] == "navi_core"
    if "hints" in report:
        assert report["hints"] == "ok"


@needs_fork
@pytest.mark.parametrize("name", sorted(type_checking_imports()))
def test_each_name_first_reached_through_its_module_has_its_hints(
    name: str, through_its_module: dict[str, dict[str, Any]]
) -> None:
    if not available(name):
        pytest.skip(f"{name} needs {EXTRA[name]}")
    report = through_its_module[name]
    assert "error" not in report, report
    assert report["same"]
    if "hints" in report:
        assert report["hints"] == "ok"
    if "module" in report:
        assert report["module"] == "navi_core"


PYDANTIC_FIRST = """
import dataclasses, importlib, sys
from pydantic import TypeAdapter
module, names = sys.argv[1], sys.argv[2].split(",")
for name in names:
    cls = getattr(importlib.import_module(module), name)
    assert cls.__module__ == "navi_core", name
    assert TypeAdapter(cls).pydantic_complete, name
print("ok")
"""


def test_pydantic_schemas_of_dataclasses_reached_first_through_their_module() -> None:
    pytest.importorskip("pydantic", reason="pydantic is an optional dependency")
    # a dataclass naming another module's public classes (Usage, Message, StopReason)
    assert (
        python(PYDANTIC_FIRST, "navi_core.events", "TurnComplete,MessageComplete")
        == "ok\n"
    )
    assert python(PYDANTIC_FIRST, "navi_core.store.base", "Approval") == "ok\n"


# -- the whole face, static and dynamic ------------------------------------------------


def test_the_type_checkers_view_names_every_public_name() -> None:
    assert set(type_checking_imports()) == set(NAMES) - {"__version__"}


def test_dir_and_star_import_give_every_public_name() -> None:
    if not all(available(n) for n in EXTRA):
        pytest.skip("a star import loads every name, PostgresStore's extra too")
    out = python(
        "import navi_core\n"
        "print(sorted(set(navi_core.__all__) - set(dir(navi_core))))\n"
        "space = {}\n"
        "exec('from navi_core import *', space)\n"
        "print(sorted(set(navi_core.__all__) - set(space)))\n"
        "print(all(space[n] is getattr(navi_core, n) for n in navi_core.__all__))\n"
    )
    assert out.splitlines() == ["[]", "[]", "True"]


def test_without_the_postgres_extra_a_star_import_works_and_use_says_what_to_install() -> (
    None
):
    out = python(
        "import sys\n"
        "sys.modules['psycopg'] = None  # as if the extra were not installed\n"
        "space = {}\n"
        "exec('from navi_core import *', space)\n"
        "import navi_core\n"
        "print(sorted(set(navi_core.__all__) - set(space)))\n"
        "try:\n"
        "    space['PostgresStore']('postgresql://localhost/x')\n"
        "except ImportError as exc:\n"
        "    print(type(exc).__name__, 'postgres' in str(exc))\n"
    )
    assert out.splitlines() == ["[]", "ImportError True"]


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'Nope'"):
        navi_core.Nope  # noqa: B018
    with pytest.raises(ImportError, match="Nope"):
        exec("from navi_core import Nope", {})


# -- a class reached while the module of a name it names is still loading ---------


CYCLE = """
import sys, typing
from pathlib import Path
import navi_core

root = Path(sys.argv[1])
(root / "cycle_a.py").write_text(
    "from __future__ import annotations\\n"
    "from typing import TYPE_CHECKING\\n"
    "from navi_core._ids import publish\\n"
    "if TYPE_CHECKING:\\n"
    "    from navi_core.cycle_b import CycleB\\n"
    "class CycleA:\\n"
    "    b: CycleB | None\\n"
    "publish(globals())\\n"
)
(root / "cycle_b.py").write_text(
    "from __future__ import annotations\\n"
    "from navi_core._ids import publish\\n"
    "from navi_core.cycle_a import CycleA\\n"
    "class CycleB:\\n"
    "    a: CycleA\\n"
    "publish(globals())\\n"
)
navi_core.__path__.append(str(root))
navi_core.__all__ += ["CycleA", "CycleB"]
vars(navi_core)["_WHERE"].update(CycleA="navi_core.cycle_a", CycleB="navi_core.cycle_b")

from navi_core.cycle_b import CycleA, CycleB  # B's module is still running as A's ends

assert CycleA.__module__ == CycleB.__module__ == "navi_core"
assert typing.get_type_hints(CycleA)["b"] == CycleB | None
assert typing.get_type_hints(CycleB)["a"] is CycleA
print("ok")
"""


def test_a_name_whose_module_is_still_loading_is_resolved_when_it_is_done(
    tmp_path: Path,
) -> None:
    # CycleA's module ends while CycleB's, which imports it, is still running: CycleA's
    # annotation naming CycleB is resolved once CycleB's module publishes
    assert python(CYCLE, str(tmp_path)) == "ok\n"


THREADS_FIRST = """
import sys, threading, random
import navi_core

names = [n for n in navi_core.__all__ if n not in ("__version__", "PostgresStore")]
random.Random(int(sys.argv[1])).shuffle(names)
groups = [names[i::8] for i in range(8)]
start = threading.Barrier(8)
errors = []

def use(group):
    start.wait()
    for name in group:
        try:
            getattr(navi_core, name)
        except BaseException as exc:
            errors.append(f"{name}: {exc!r}")

threads = [threading.Thread(target=use, args=(g,)) for g in groups]
for t in threads:
    t.start()
for t in threads:
    t.join()
twins = sorted(
    f"{module_name}.{name}"
    for module_name, module in list(sys.modules.items())
    if module_name.startswith("navi_core") and module is not None
    for name, value in list(vars(module).items())
    if name in names and isinstance(value, type) and value.__qualname__ == name
    and value is not getattr(navi_core, name)
)
print(errors[:3], twins[:3])
"""


@pytest.mark.parametrize("seed", range(6))
def test_threads_using_names_first_at_once_load_each_module_once(seed: int) -> None:
    assert python(THREADS_FIRST, str(seed)).strip() == "[] []"


def test_subpackages_are_attributes_of_the_package() -> None:
    out = python(
        "import navi_core\n"
        "print(navi_core.providers.__name__, navi_core.store.base.__name__)\n"
        "print(hasattr(navi_core, 'no_such_module'))\n"
    )
    assert out.splitlines() == ["navi_core.providers navi_core.store.base", "False"]
