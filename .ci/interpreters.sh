# shellcheck shell=bash
# Runs the suite on every other CPython 3.10+ this machine has (pyenv's, and any
# python3.X on PATH), found at run time, so a machine with other versions is covered
# too. Each gets its own venv with the compiled core built for it; the server suites
# that take minutes (gunicorn, llama-server, wheel builds) and the docs site (its
# plugins resolve to other versions on older Pythons) are built on the main interpreter
# only. ResourceWarning is an error everywhere (pyproject's filterwarnings).
# Then, on Python 3.10 (the oldest the project supports), the project is installed
# with no extras into a fresh venv and `navi-core --version` and `navi-core demo` run
# outside the checkout, as `pip install . && navi-core demo` does on a new machine: a
# module only an extra brings (tomli was one) would break every command there.
# Sourced by .ci/run; prints one line per interpreter and fails if any run failed.

navi_interpreters() {
  local main candidates=() seen="" exe version
  main=$(python -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if command -v pyenv >/dev/null 2>&1; then
    for exe in "$(pyenv root)"/versions/*/bin/python3; do candidates+=("$exe"); done
  fi
  for version in 10 11 12 13 14 15; do
    exe=$(command -v "python3.$version" 2>/dev/null) && candidates+=("$exe")
  done
  for exe in "${candidates[@]}"; do
    [ -x "$exe" ] || continue
    version=$("$exe" -c 'import sys; print("%d.%d" % sys.version_info[:2]) if sys.version_info >= (3, 10) and sys.implementation.name == "cpython" else None' 2>/dev/null) || continue
    [ "$version" = "None" ] || [ "$version" = "$main" ] && continue
    case " $seen " in *" $version "*) continue ;; esac
    seen="$seen $version"
    echo "$exe"
  done
}

navi_other_interpreters() {
  local exe version venv log summary failed=0 results=()
  for exe in $(navi_interpreters); do
    version=$("$exe" -c 'import platform; print(platform.python_version())')
    venv="${NAVI_CI_VENVS:-/tmp/navi-ci-venvs}/py$version"
    log="$venv.log"
    echo "== Python $version ($exe): installing into $venv"
    if [ ! -x "$venv/bin/python" ]; then
      "$exe" -m venv "$venv"
    fi
    "$venv/bin/python" -m pip install -q --upgrade pip
    "$venv/bin/python" -m pip install -q -e ".[test]"
    "$venv/bin/python" -c "import navi_core.core as c; print('navi_core core:', c.IMPLEMENTATION)"
    echo "== Python $version: the suite (server suites run on the main interpreter)"
    set +e
    "$venv/bin/python" -m pytest -q -p no:cacheprovider -m "not slow" \
      --ignore=tests/serve --ignore=tests/test_llama_server.py --ignore=tests/test_build.py \
      --deselect=tests/test_docs.py::test_the_site_builds_strict_with_every_public_name \
      >"$log" 2>&1
    local status=$?
    set -e
    summary=$(grep -E '(passed|failed|error).* in [0-9.]+s' "$log" | tail -1 | tr -d '=' | sed 's/^ *//; s/ *$//' || true)
    results+=("Python $version: ${summary:-no summary (exit $status)}")
    if [ "$status" -ne 0 ]; then
      failed=1
      grep -E '^(FAILED|ERROR) ' "$log" | head -40 || true
      tail -30 "$log"
    fi
  done
  local oldest
  oldest=$(navi_python_310)
  if [ -z "$oldest" ]; then
    results+=("Python 3.10 without extras: skipped (no Python 3.10 on this machine)")
  elif navi_smoke_without_extras "$oldest"; then
    results+=("Python 3.10 without extras: navi-core --version and demo ran")
  else
    results+=("Python 3.10 without extras: FAILED")
    failed=1
  fi
  echo "== Suites on the other interpreters:"
  for line in "${results[@]}"; do echo "   $line"; done
  return "$failed"
}

# The Python 3.10 interpreter: the main one, or one navi_interpreters finds; empty if
# there is none.
navi_python_310() {
  local exe
  for exe in "$(command -v python)" $(navi_interpreters); do
    if [ -x "$exe" ] && [ "$("$exe" -c 'import sys; print(sys.version_info[:2] == (3, 10))' 2>/dev/null)" = "True" ]; then
      echo "$exe"
      return 0
    fi
  done
}

# navi_smoke_without_extras PYTHON: `pip install .` with no extras into a fresh venv,
# then `navi-core --version` and `navi-core demo` from a folder outside the checkout;
# fails (printing what they said) if either fails or the demo's turn does not end.
navi_smoke_without_extras() {
  local exe=$1 work status=0
  work=$(mktemp -d "${TMPDIR:-/tmp}/navi-no-extras.XXXXXX")
  echo "== $("$exe" -c 'import platform; print("Python", platform.python_version())'): pip install . (no extras) into a fresh venv, then navi-core --version and demo"
  if ! "$exe" -m venv "$work/venv" >"$work/install.log" 2>&1 \
    || ! "$work/venv/bin/python" -m pip install -q "$PWD" >>"$work/install.log" 2>&1; then
    tail -30 "$work/install.log"
    echo "   the install without extras failed"
    status=1
  elif ! (cd "$work" && "$work/venv/bin/navi-core" --version \
          && "$work/venv/bin/navi-core" demo --db demo.db) >"$work/out.txt" 2>&1; then
    cat "$work/out.txt"
    echo "   navi-core failed without extras"
    status=1
  elif ! grep -q '\[end_turn\] 3 responses, 3 tool calls' "$work/out.txt"; then
    cat "$work/out.txt"
    echo "   the demo's turn did not complete"
    status=1
  fi
  rm -rf "$work"
  return "$status"
}
