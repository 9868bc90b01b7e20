#!/usr/bin/env bash
# Installs navi-core as a user would, from what a release ships, outside the checkout:
#  1. builds the sdist, and the wheel from that sdist (python -m build);
#  2. installs the wheel (not editable) into a fresh venv and runs `navi-core demo` from
#     another folder, on the compiled core; a missing extra's hint names that wheel;
#  3. installs the sdist with no working compiler (CC=/bin/false): the build says it
#     compiles, fails to, and the install falls back to the pure-Python twin;
#  4. installs the sdist with NAVI_CORE_PURE=1: no compile at all, the twin again.
# Needs PyPI (the build requirements and the dependencies). Run from anywhere.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
export PIP_DISABLE_PIP_VERSION_CHECK=1
# the twin installs below must not inherit CI's demand for the compiled core; the build
# step asks for it itself, and the wheel's demo must name the compiled core
unset NAVI_CORE_REQUIRE_EXTENSION
py="${PYTHON:-python3}"

fail() { echo "wheel.sh: $*" >&2; exit 1; }

step() { echo "wheel.sh: $*"; }

# Run `navi-core demo` from a folder outside the checkout; $2 is the core it must name.
demo() {
  local venv="$1" core="$2" dir
  dir="$(mktemp -d "$work/elsewhere.XXXX")"
  (cd "$dir" && "$venv/bin/navi-core" demo --db demo.db) >"$dir/out.txt" 2>&1 \
    || { cat "$dir/out.txt"; fail "navi-core demo failed in $venv"; }
  grep -q "navi_core demo (core: $core," "$dir/out.txt" \
    || { cat "$dir/out.txt"; fail "the demo did not run on the $core core"; }
  grep -q '\[end_turn\] 3 responses, 3 tool calls' "$dir/out.txt" \
    || { cat "$dir/out.txt"; fail "the demo's turn did not complete"; }
  # the package came from the venv, not from the checkout
  (cd "$dir" && "$venv/bin/python" -c 'import navi_core, sys; print(navi_core.__file__)') \
    | grep -q "^$venv/" || fail "navi_core was not imported from $venv"
}

step "building the sdist and the wheel"
"$py" -m venv "$work/builder"
"$work/builder/bin/pip" install -q build
(cd "$root" && NAVI_CORE_REQUIRE_EXTENSION=1 "$work/builder/bin/python" -m build \
  --outdir "$work/dist" .) >"$work/build.log" 2>&1 \
  || { tail -50 "$work/build.log"; fail "python -m build failed"; }
sdist="$(ls "$work"/dist/navi_core-*.tar.gz)"
wheel="$(ls "$work"/dist/navi_core-*.whl)"
"$work/builder/bin/python" - "$wheel" <<'EOF' || fail "the wheel has no compiled core"
import sys, zipfile
names = zipfile.ZipFile(sys.argv[1]).namelist()
sys.exit(not any(n.startswith("navi_core/_core.") and n.endswith((".so", ".pyd")) for n in names))
EOF
step "built $(basename "$sdist") and $(basename "$wheel")"

step "installing the wheel into a fresh venv"
"$py" -m venv "$work/user"
"$work/user/bin/pip" install -q "$wheel"
demo "$work/user" cython
# a missing extra names a command that works for this install: the wheel it came from
hint="$(cd "$work" && "$work/user/bin/navi-core" bench --model m \
  --base-url http://127.0.0.1:9/v1 --png out.png 2>&1 || true)"
case "$hint" in
  *"pip install '$wheel[bench]'"*) ;;
  *) fail "the missing-extra hint does not name the wheel: $hint" ;;
esac
step "wheel: demo ran on the compiled core; the install hint names the wheel"

step "installing the sdist with no compiler (CC=/bin/false)"
"$py" -m venv "$work/nocc"
log="$work/nocc.log"
install_nocc=(env -u NAVI_CORE_REQUIRE_EXTENSION CC=/bin/false CXX=/bin/false
  "$work/nocc/bin/pip" install --no-cache-dir "$sdist")
if command -v script >/dev/null 2>&1; then
  # on a terminal, as a user runs it: plain pip hides the build's output, so the
  # compile notice must reach the terminal by itself
  script -qec "$(printf '%q ' "${install_nocc[@]}") -q" "$log" >/dev/null \
    || { cat "$log"; fail "the install without a compiler failed"; }
else
  "${install_nocc[@]}" -v >"$log" 2>&1 \
    || { tail -50 "$log"; fail "the install without a compiler failed"; }
fi
grep -q "navi_core: compiling the Cython core" "$log" \
  || { cat "$log"; fail "the build did not say that it compiles the core"; }
demo "$work/nocc" python
step "no compiler: the build said so, the demo ran on the pure-Python twin"

step "installing the sdist with NAVI_CORE_PURE=1"
"$py" -m venv "$work/pure"
env -u NAVI_CORE_REQUIRE_EXTENSION NAVI_CORE_PURE=1 \
  "$work/pure/bin/pip" install -q --no-cache-dir "$sdist"
demo "$work/pure" python
step "NAVI_CORE_PURE=1: the demo ran on the pure-Python twin"

echo "wheel.sh: 4 passed, 0 failed"
