# Start a throwaway PostgreSQL server for the test suite; meant to be sourced:
#
#     . .ci/postgres.sh            # exports NAVI_TEST_POSTGRES_DSN
#     navi_pg_stop                 # stops the server and deletes its data (also on exit)
#
# Installs the server with apt-get when its binaries are missing (Debian/Ubuntu),
# runs it as the `postgres` OS user when started as root (the server refuses root),
# listens on 127.0.0.1 on a free port plus a unix socket in its data directory, and
# trusts local connections only. Nothing outside the temporary directory is touched.

navi_pg_bindir() {
    local dir
    for dir in "${NAVI_PG_BINDIR:-}" /usr/lib/postgresql/*/bin; do
        if [ -n "$dir" ] && [ -x "$dir/initdb" ] && [ -x "$dir/pg_ctl" ]; then
            echo "$dir"
            return 0
        fi
    done
    if command -v pg_config >/dev/null 2>&1 && [ -x "$(pg_config --bindir)/initdb" ]; then
        pg_config --bindir
        return 0
    fi
    return 1
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
    NAVI_PG_BIN="$(navi_pg_bindir)" || {
        echo "postgres.sh: installing the PostgreSQL server (apt-get)" >&2
        apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null \
            || { echo "postgres.sh: could not install PostgreSQL" >&2; return 1; }
        NAVI_PG_BIN="$(navi_pg_bindir)" || { echo "postgres.sh: no initdb after install" >&2; return 1; }
    }
    NAVI_PG_ROOT="$(mktemp -d /tmp/navi-pg.XXXXXX)" || return 1
    if [ "$(id -u)" = 0 ]; then
        chown postgres: "$NAVI_PG_ROOT"
    fi
    local port
    port="$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')" || return 1
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
    export NAVI_PG_BIN NAVI_PG_ROOT
    echo "postgres.sh: PostgreSQL on 127.0.0.1:$port (in $NAVI_PG_ROOT); stop with navi_pg_stop" >&2
}

if navi_pg_start; then
    # Chain onto an EXIT trap the sourcing script may already have.
    _navi_pg_prev_trap="$(trap -p EXIT | sed -e "s/^trap -- '\(.*\)' EXIT\$/\1/")"
    # shellcheck disable=SC2064
    trap "navi_pg_stop${_navi_pg_prev_trap:+; $_navi_pg_prev_trap}" EXIT
    unset _navi_pg_prev_trap
else
    echo "postgres.sh: PostgreSQL did not start; its tests will be skipped (or fail under CI)" >&2
fi
