"""The user guide works as written: README.md and every page under docs/.

* Every Python block runs as pasted (from a scratch folder), and passes ruff; a block
  that needs a server or a key says so with ``test="skip" reason="..."`` and is only
  linted and compiled. A block that only includes a file of ``examples/``
  (``--8<-- "examples/NAME.py"``) is not run here: ``tests/test_examples.py`` runs
  those files, and every one of them is included by a page.
* Reliability's table names test files that exist, and its "Run them" block runs
  every one of them.
* Every ``sh`` block names commands and flags that exist: ``navi-core`` subcommands and
  their flags (from ``--help``), ``bench/`` scripts and their options, extras in
  pyproject.toml, test paths.
* The API reference lists every name of ``navi_core.__all__``, and the site builds
  with ``mkdocs build --strict`` (when the ``docs`` extra is installed).
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import re
import shlex
import subprocess
import sys
from functools import cache
from pathlib import Path
from typing import Any

import pytest

import navi_core

if sys.version_info >= (3, 11):
    import tomllib
else:  # the test extra installs tomli there
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
PAGES = sorted([ROOT / "README.md", *DOCS.rglob("*.md")])
FENCE = re.compile(r"^```(?P<info>[^\n]*)\n(?P<body>.*?)^```\s*$", re.M | re.S)
#: a ``pymdownx.snippets`` line that includes a file (paths from the repository root)
SNIPPET = re.compile(r'^--8<-- "(?P<path>[^"]+)"\s*$', re.M)

try:  # the docs extra: absent from a plain test install
    examples: Any = importlib.import_module("pytest_examples")
except ImportError:
    examples = None


def blocks(language: str) -> list[tuple[str, str]]:
    """(``path:line``, body) of every fenced block in ``language``, in every page."""
    out = []
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        for m in FENCE.finditer(text):
            if m["info"].split(" ", 1)[0] == language:
                line = text.count("\n", 0, m.start()) + 1
                out.append((f"{page.relative_to(ROOT)}:{line}", m["body"]))
    return out


def only_includes(body: str) -> bool:
    """True for a block that only includes files (their own tests run them)."""
    return bool(SNIPPET.search(body)) and not SNIPPET.sub("", body).strip()


def python_examples() -> list[Any]:
    if examples is None:
        return []
    found = examples.find_examples(*map(str, PAGES))
    return [
        ex
        for ex in found
        if ex.prefix.split(" ", 1)[0] in ("py", "python")
        and not only_includes(ex.source)
    ]


def _example_id(example: Any) -> str:
    return f"{Path(example.path).relative_to(ROOT)}:{example.start_line}"


def test_ci_has_the_docs_extra() -> None:
    """Under ``CI=true`` the docs checks never skip: a missing extra fails here."""
    if os.environ.get("CI", "").lower() not in ("true", "1"):
        pytest.skip("outside CI the docs extra is optional")
    missing = [
        name
        for name in ("pytest_examples", "mkdocs", "mkdocstrings")
        if importlib.util.find_spec(name) is None
    ]
    assert not missing, f"CI must install .[docs]; missing: {missing}"


@pytest.mark.skipif(examples is None, reason="needs the docs extra (pytest-examples)")
@pytest.mark.parametrize("example", python_examples(), ids=_example_id)
def test_python_block(
    example: Any,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    request: pytest.FixtureRequest,
) -> None:
    evaluator = examples.EvalExample(tmp_path=tmp_path, pytest_request=request)
    evaluator.set_config(line_length=88, ruff_ignore=["E501"], target_version="py310")
    evaluator.lint_ruff(example)
    settings = example.prefix_settings()
    if settings.get("test") == "skip":
        assert settings.get("reason"), "a block that is not run says why"
        compile(example.source, _example_id(example), "exec")
        return
    monkeypatch.chdir(tmp_path)  # files the examples write (navi.db, ...) land here
    try:
        evaluator.run(example)
    except Exception as e:
        # the example's code objects carry markdown positions that CPython 3.11's
        # traceback formatting trips over: report the page's line instead
        lines = []
        tb = e.__traceback__
        while tb is not None:
            if tb.tb_frame.f_code.co_filename == str(example.path):
                lines.append(tb.tb_lineno)
            tb = tb.tb_next
        where = (
            f"{Path(example.path).relative_to(ROOT)} line {lines[-1] if lines else '?'}"
        )
        raise AssertionError(f"{where}: {type(e).__name__}: {e}") from None


def test_few_blocks_are_not_run() -> None:
    fences = [
        m["info"]
        for p in PAGES
        for m in FENCE.finditer(p.read_text())
        if not only_includes(m["body"])
    ]
    python = [f for f in fences if f.split(" ", 1)[0] in ("py", "python")]
    skipped = [f for f in python if 'test="skip"' in f]
    assert python and len(skipped) * 5 <= len(python), skipped
    assert all('reason="' in f for f in skipped)


def included_files() -> dict[str, list[str]]:
    """Each file a page includes with ``--8<--``, and the pages that include it."""
    out: dict[str, list[str]] = {}
    for page in PAGES:
        for m in SNIPPET.finditer(page.read_text(encoding="utf-8")):
            out.setdefault(m["path"], []).append(str(page.relative_to(ROOT)))
    return out


def test_every_example_is_included_by_a_page_and_every_include_exists() -> None:
    """The examples are shown from their files, so the site never shows a stale copy."""
    included = included_files()
    assert [p for p in included if not (ROOT / p).is_file()] == []
    programs = {f"examples/{p.name}" for p in (ROOT / "examples").glob("*.py")}
    assert programs, "examples/ has no programs"
    assert sorted(programs - set(included)) == []


def test_the_examples_section_lists_every_example_page() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    section = re.search(r"^  - Examples:\n((?:      .*\n)+)", nav, re.M)
    assert section is not None, "mkdocs.yml has no Examples section"
    listed = set(re.findall(r"(examples/[\w-]+\.md)", section[1]))
    pages = {
        str(p.relative_to(DOCS))
        for p in (DOCS / "examples").glob("*.md")
        if p.name != "index.md"
    }
    assert pages and listed >= pages


def reliability_rows() -> list[tuple[str, list[str]]]:
    """(promise, files named in its test cell) of each row of Reliability's tables."""
    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    rows = []
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        if not line.startswith("| ") or len(cells) != 2 or cells[0] == "promise":
            continue
        rows.append((cells[0], re.findall(r"`([\w./-]+)`", cells[1])))
    return rows


def test_reliability_rows_name_files_the_run_block_runs() -> None:
    rows = reliability_rows()
    assert len(rows) >= 20
    text = (DOCS / "reliability.md").read_text(encoding="utf-8")
    run = text.split("Run them", 1)[1]
    block = FENCE.search(run)
    assert block is not None and block["info"] == "sh"
    ran = {w for words in commands(block["body"]) for w in words}
    for promise, files in rows:
        assert files, f"no test named for: {promise}"
        for name in files:
            assert (ROOT / name).is_file(), name
            assert name in ran, f"the run block does not run {name}"


@cache
def help_text(*command: str) -> str:
    result = subprocess.run(
        [sys.executable, "-m", "navi_core", *command, "--help"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert result.returncode == 0, (command, result.stderr)
    return result.stdout


def extras() -> set[str]:
    data = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    return set(data["project"]["optional-dependencies"])


def commands(body: str) -> list[list[str]]:
    """Each simple command of a shell block, comments and continuations removed."""
    text = body.replace("\\\n", " ")
    out = []
    for line in text.splitlines():
        words = shlex.split(line, comments=True)
        current: list[str] = []
        for word in [*words, "&&"]:
            if word in ("&&", "||", ";", "|"):
                if current:
                    out.append(current)
                current = []
            else:
                current.append(word)
    return out


def check_navi_core(args: list[str]) -> None:
    top = help_text()
    sub = [a for a in args if not a.startswith("-")][:1]
    if not sub:
        assert all(a in top for a in args), args
        return
    assert re.search(rf"^\s+{sub[0]}\s", top, re.M), f"no command {sub[0]!r}"
    path = sub
    if sub[0] == "sessions":
        nested = [a for a in args[1:] if not a.startswith("-")][:1]
        assert nested and nested[0] in ("list", "show", "delete"), args
        path = [*sub, nested[0]]
    usage = help_text(*path)
    for arg in args:
        if arg.startswith("--"):
            flag = arg.split("=", 1)[0]
            assert re.search(rf"{re.escape(flag)}\b", usage), f"{path}: no flag {flag}"


def check_python(args: list[str]) -> None:
    if args[:2] == ["-m", "pytest"]:
        for arg in args[2:]:
            if arg.startswith("tests/"):
                assert (ROOT / arg.split("::")[0]).exists(), arg
        return
    if args[:2] == ["-m", "navi_core"]:
        check_navi_core(args[2:])
        return
    script = ROOT / args[0]
    assert script.is_file(), args[0]
    source = script.read_text(encoding="utf-8")
    for arg in args[1:]:
        if arg.startswith("--"):
            assert f'"{arg}"' in source, f"{args[0]} has no option {arg}"


def check_pip(args: list[str]) -> None:
    for arg in args:
        m = re.fullmatch(r"\.\[(?P<names>[\w,-]+)\]", arg)
        if m:
            assert set(m["names"].split(",")) <= extras(), arg


def sh_blocks() -> list[tuple[str, str]]:
    return blocks("sh")


@pytest.mark.parametrize(
    ("where", "body"), sh_blocks(), ids=[w for w, _ in sh_blocks()]
)
def test_sh_block_names_real_commands_and_flags(where: str, body: str) -> None:
    for words in commands(body):
        while words and "=" in words[0] and not words[0].startswith("-"):
            words = words[1:]  # VAR=value before the command
        if not words:
            continue
        name, args = words[0], words[1:]
        if name == "navi-core":
            check_navi_core(args)
        elif name == "python":
            check_python(args)
        elif name == "pip" and args[:1] == ["install"]:
            check_pip(args[1:])
        elif name in ("source", "bash"):
            assert (ROOT / args[0]).is_file(), args[0]


@pytest.mark.parametrize(("where", "body"), blocks("toml"))
def test_toml_block_parses(where: str, body: str) -> None:
    tomllib.loads(body)


def reference_members() -> list[str]:
    names = []
    for page in sorted((DOCS / "reference").glob("*.md")):
        text = page.read_text(encoding="utf-8")
        for block in re.findall(r"^::: navi_core\n((?:    .*\n)+)", text, re.M):
            names += re.findall(r"^ {8}- (\S+)$", block, re.M)
    return names


def test_the_api_reference_lists_every_public_name_once() -> None:
    listed = reference_members()
    assert sorted(listed) == sorted(navi_core.__all__)


def test_the_readme_is_short_and_its_set_up_is_two_commands() -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) <= 200
    setup = readme.split("## Set-up", 1)[1]
    first = FENCE.search(setup)
    assert first is not None and first["info"] == "sh"
    lines = first["body"].splitlines()
    assert len(lines) == 2
    assert "navi-core demo" in lines[0] and "python -m pytest" in lines[1]


def test_bench_tables_come_from_the_json_files() -> None:
    sys.path.insert(0, str(DOCS))
    try:
        hooks = importlib.import_module("_hooks")
    finally:
        sys.path.remove(str(DOCS))
    for page in DOCS.rglob("*.md"):
        for name in hooks.MARKER.findall(page.read_text(encoding="utf-8")):
            data = json.loads((DOCS / "data" / name).read_text(encoding="utf-8"))
            table = hooks.bench_table(data)
            p50 = data["metrics"]["ttft"]["p50"] * 1e3
            assert f"| time to first token | {p50:,.2f} |" in table
    fence = '```python test="skip" reason="x"\nprint(1)\n```\n'
    assert hooks.render(fence).startswith("```python\n")
    titled = '```python title="examples/quickstart.py" test="skip" reason="x"\n'
    assert hooks.render(titled) == '```python title="examples/quickstart.py"\n'


def test_every_page_is_reachable_from_the_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8").split("\nnav:", 1)[1]
    listed = set(re.findall(r"([\w/-]+\.md)\s*$", nav, re.M))
    pages = {
        str(p.relative_to(DOCS))
        for p in DOCS.rglob("*.md")
        if p.relative_to(DOCS).parts[0] != "data"
    }
    assert sorted(pages - listed) == []
    assert sorted(listed - pages) == []


def _bench_record(script: str, *args: str, tmp: Path) -> dict[str, Any]:
    """Run a ``bench/`` script with ``--json`` and return what it wrote."""
    out = tmp / f"{script}.json"
    subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), *args, "--json", str(out)],
        cwd=tmp,
        check=True,
        capture_output=True,
        timeout=300,
    )
    data: dict[str, Any] = json.loads(out.read_text(encoding="utf-8"))
    return data


def test_bench_results_render_from_what_a_script_wrote(tmp_path: Path) -> None:
    sys.path.insert(0, str(DOCS))
    try:
        hooks = importlib.import_module("_hooks")
    finally:
        sys.path.remove(str(DOCS))
    data = _bench_record(
        "bench_observers.py", "--repeats", "1", "--deltas", "200", "--calls", "4",
        tmp=tmp_path,
    )  # fmt: skip
    assert data["command"] == (
        "python bench/bench_observers.py --repeats 1 --deltas 200 --calls 4"
    )
    (tmp_path / "run.json").write_text(json.dumps(data), encoding="utf-8")
    rendered = hooks.render("<!-- bench-results: run.json -->", tmp_path)
    assert rendered.startswith(f"`{data['command']}`")
    first = data["tables"][0]
    assert f"| {' | '.join(first['rows'][0])} |" in rendered
    for page in DOCS.rglob("*.md"):
        for name in hooks.RESULTS.findall(page.read_text(encoding="utf-8")):
            kept = json.loads((DOCS / "data" / name).read_text(encoding="utf-8"))
            script = kept["command"].split()[1]
            assert (ROOT / script).is_file() and kept["tables"], name


@pytest.mark.skipif(
    importlib.util.find_spec("mkdocs") is None, reason="needs the docs extra (mkdocs)"
)
def test_the_site_builds_strict_with_every_public_name(tmp_path: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-d", str(tmp_path)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert result.returncode == 0, result.stderr[-3000:]
    ids: set[str] = set()
    for html in (tmp_path / "reference").rglob("*.html"):
        ids |= set(re.findall(r'id="(navi_core\.[^"]+)"', html.read_text()))
    assert [n for n in navi_core.__all__ if f"navi_core.{n}" not in ids] == []
