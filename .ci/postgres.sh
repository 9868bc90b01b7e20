# Start a throwaway PostgreSQL server for the test suite; meant to be sourced by bash:
#
#     source .ci/postgres.sh       # exports NAVI_TEST_POSTGRES_DSN
#     navi_pg_stop                 # stops the server and deletes its data (also on exit)
#
# The server binaries come from $NAVI_PG_BINDIR when it is set (and only from there),
# else from `pg_config --bindir`, /usr/lib/postgresql/*/bin (newest first) or the
# initdb on PATH; only when none has them is the server installed with apt-get
# (Debian/Ubuntu). Started as root, the server runs as the `postgres` OS user (it
# refuses root), which is created when missing. It listens on 127.0.0.1 on a free port
# plus a unix socket in its data directory, and trusts local connections only; its
# data lives in a temporary directory, deleted when it stops. Sourcing again in the
# same shell stops the previous server first.
#
# When the server cannot be started its tests are skipped, except under CI=true:
# then sourcing returns 1, so a caller running with `set -e` stops there.

navi_pg_is_ci() {
    case "${CI:-}" in
        [Tt][Rr][Uu][Ee] | 1) return 0 ;;
    esac
    return 1
}

# True when directory $1 holds every server program this script runs.
navi_pg_has_bins() {
    local tool
    [ -n "$1" ] || return 1
    for tool in initdb pg_ctl pg_isready createdb; do
        [ -x "$1/$tool" ] || return 1
    done
}

# Prints the directory of the server binaries. Returns 1 when there is none (installing
# may help), 2 when $NAVI_PG_BINDIR is set but lacks them (installing would not).
navi_pg_bindir() {
    local dir
    local -a candidates=()
    if [ -n "${NAVI_PG_BINDIR:-}" ]; then
        if navi_pg_has_bins "$NAVI_PG_BINDIR"; then
            echo "$NAVI_PG_BINDIR"
            return 0
        fi
        echo "postgres.sh: NAVI_PG_BINDIR=$NAVI_PG_BINDIR lacks initdb, pg_ctl, pg_isready or createdb" >&2
        return 2
    fi
    if command -v pg_config >/dev/null 2>&1; then
        candidates+=("$(pg_config --bindir 2>/dev/null)")
    fi
    while IFS= read -r dir; do
        candidates+=("$dir")
    done < <(printf '%s\n' /usr/lib/postgresql/*/bin | sort -r -V)
    if command -v initdb >/dev/null 2>&1; then
        candidates+=("$(dirname "$(readlink -f "$(command -v initdb)")")")
    fi
    for dir in "${candidates[@]}"; do
        if navi_pg_has_bins "$dir"; then
            echo "$dir"
            return 0
        fi
    done
    return 1
}

navi_pg_install() {
    if ! command -v apt-get >/dev/null 2>&1; then
        echo "postgres.sh: no PostgreSQL server found; install one or set NAVI_PG_BINDIR" >&2
        return 1
    fi
    echo "postgres.sh: installing the PostgreSQL server (apt-get)" >&2
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
        || { echo "postgres.sh: could not install PostgreSQL" >&2; return 1; }
}

# As root: makes sure the `postgres` OS user exists to own the server.
navi_pg_owner() {
    [ "$(id -u)" = 0 ] || return 0
    id -u postgres >/dev/null 2>&1 && return 0
    echo "postgres.sh: creating the postgres OS user" >&2
    local shell
    shell="$(command -v nologin || echo /bin/false)"
    if command -v useradd >/dev/null 2>&1; then
        useradd --system --user-group --no-create-home --home-dir /nonexistent \
            --shell "$shell" postgres
    else
        adduser -S -D -H -h /nonexistent -s "$shell" postgres  # BusyBox
    fi || { echo "postgres.sh: could not create the postgres OS user" >&2; return 1; }
}

navi_pg_as_owner() {
    if [ "$(id -u)" = 0 ]; then
        runuser -u postgres -- "$@"
    else
        "$@"
    fi
}

navi_pg_stop() {
    if [ -n "${NAVI_PG_ROOT:-}" ] && [ -d "$NAVI_PG_ROOT" ]; then
        if [ -f "$NAVI_PG_ROOT/data/postmaster.pid" ]; then
            navi_pg_as_owner "$NAVI_PG_BIN/pg_ctl" -D "$NAVI_PG_ROOT/data" -m fast -w stop >/dev/null 2>&1 || true
        fi
        rm -rf "$NAVI_PG_ROOT"
    fi
    unset NAVI_PG_ROOT NAVI_TEST_POSTGRES_DSN
}

navi_pg_start() {
    navi_pg_stop
    local found=0
    NAVI_PG_BIN="$(navi_pg_bindir)" || found=$?
    if [ "$found" = 1 ]; then
        navi_pg_install || return 1
        NAVI_PG_BIN="$(navi_pg_bindir)" || { echo "postgres.sh: no initdb after install" >&2; return 1; }
    elif [ "$found" != 0 ]; then
        return 1
    fi
    navi_pg_owner || return 1
    NAVI_PG_ROOT="$(mktemp -d /tmp/navi-pg.XXXXXX)" || return 1
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$NAVI_PG_ROOT" || { navi_pg_stop; return 1; }
    fi
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" \
        || { navi_pg_stop; return 1; }
    navi_pg_as_owner "$NAVI_PG_BIN/initdb" -D "$NAVI_PG_ROOT/data" -U postgres --auth=trust \
        --encoding=UTF8 --no-locale >"$NAVI_PG_ROOT/initdb.log" 2>&1 \
        || { cat "$NAVI_PG_ROOT/initdb.log" >&2; navi_pg_stop; return 1; }
    # fsync off: the data is thrown away; crash-safety tests kill clients, not the server
    navi_pg_as_owner "$NAVI_PG_BIN/pg_ctl" -D "$NAVI_PG_ROOT/data" -l "$NAVI_PG_ROOT/server.log" -w -t 60 \
        -o "-h 127.0.0.1 -p $port -k $NAVI_PG_ROOT -c fsync=off -c max_connections=200" start >/dev/null \
        || { cat "$NAVI_PG_ROOT/server.log" >&2; navi_pg_stop; return 1; }
    "$NAVI_PG_BIN/pg_isready" -h 127.0.0.1 -p "$port" -t 30 >/dev/null \
        || { echo "postgres.sh: server not ready" >&2; navi_pg_stop; return 1; }
    "$NAVI_PG_BIN/createdb" -h 127.0.0.1 -p "$port" -U postgres navi_test || { navi_pg_stop; return 1; }
    export NAVI_TEST_POSTGRES_DSN="postgresql://postgres@127.0.0.1:$port/navi_test"
    echo "postgres.sh: PostgreSQL on 127.0.0.1:$port (in $NAVI_PG_ROOT); stop with navi_pg_stop" >&2
}

# The EXIT trap: stops the server, then runs the EXIT trap the shell had before, with
# $? as it was at exit.
navi_pg_on_exit() {
    local status=$?
    navi_pg_stop
    if [ -n "${NAVI_PG_PREV_EXIT_TRAP:-}" ]; then
        # An `if` sets $? without tripping a caller's `set -e`.
        if navi_pg_status "$status"; then
            eval "$NAVI_PG_PREV_EXIT_TRAP"
        else
            eval "$NAVI_PG_PREV_EXIT_TRAP"
        fi
    fi
}

navi_pg_status() {
    return "$1"
}

# Called as `navi_pg_keep_trap -- BODY EXIT`: keeps BODY.
navi_pg_keep_trap() {
    [ "$1" != -- ] || shift
    NAVI_PG_PREV_EXIT_TRAP=$1
}

# Puts navi_pg_on_exit in the EXIT trap, keeping the trap that was there. `trap -p`
# prints `trap -- 'BODY' EXIT` with BODY quoted for the shell, so evaluating it with
# `trap` replaced by navi_pg_keep_trap recovers BODY exactly, whatever quotes it holds.
navi_pg_chain_exit_trap() {
    local current
    current="$(trap -p EXIT)"
    case "$current" in
        *navi_pg_on_exit*) return 0 ;;  # sourced again: chained already
    esac
    NAVI_PG_PREV_EXIT_TRAP=""
    if [ -n "$current" ]; then
        eval "navi_pg_keep_trap ${current#trap }"
    fi
    trap navi_pg_on_exit EXIT
}

if navi_pg_start; then
    navi_pg_chain_exit_trap
elif navi_pg_is_ci; then
    echo "postgres.sh: PostgreSQL did not start, and CI=true needs its tests" >&2
    return 1 2>/dev/null || exit 1
else
    echo "postgres.sh: PostgreSQL did not start; its tests will be skipped" >&2
fi
