"""Running a ``ServeApp`` under gunicorn: ``worker.ServeWorker``s, graceful shutdown.

Each worker builds its own app after the fork (stores and HTTP clients are not shared
across processes). On SIGTERM a worker stops accepting, refuses new turns with 503,
lets running turns go on for ``grace`` seconds, then cancels them; each ends with
``TurnComplete(CANCELLED)`` and keeps what it committed before the worker exits.
navi_core's warnings and errors (a failure's details under its error id) go to
stderr beside gunicorn's own log, with secrets redacted.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import signal
import socket
import sys
from collections import Counter
from collections.abc import Callable
from typing import Any

from gunicorn.app.base import BaseApplication

from .._logs import SECRET_FILTER
from .app import ServeApp
from .worker import worker_class

__all__ = ["GunicornServer", "gunicorn_options", "listen_socket"]


def listen_socket(bind: str, backlog: int = 2048) -> socket.socket:
    """A socket listening on ``bind`` (``HOST:PORT``, ``[IPv6]:PORT``) for gunicorn to
    take as ``fd://N``: an address in use fails here at once, where gunicorn would
    retry for seconds. A host name is bound as IPv4, as gunicorn binds it.

    Raises:
        OSError: the address cannot be bound (in use, not this host's, privileged).
    """
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    try:
        v6 = ipaddress.ip_address(host).version == 6
    except ValueError:
        v6 = False
    sock = socket.socket(socket.AF_INET6 if v6 else socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, int(port)))
        sock.listen(backlog)
    except BaseException:
        sock.close()
        raise
    return sock


def gunicorn_options(
    bind: str,
    workers: int,
    threads: int,
    grace: float,
    timeout: float,
    *,
    read_timeout: float = 10.0,
    send_timeout: float = 60.0,
    max_body: int = 1 << 20,
) -> dict[str, Any]:
    """gunicorn settings for ``navi-core serve``: ``threads`` turn threads a worker,
    requests read whole on its event loop before a thread takes them."""
    return {
        "bind": [bind],
        "workers": workers,
        "threads": threads,
        "worker_class": worker_class(
            read_timeout=read_timeout, send_timeout=send_timeout, max_body=max_body
        ),
        # the grace period, then time for cancelled turns to commit and answer
        "graceful_timeout": int(grace + 10.99),
        "timeout": int(timeout),
        "keepalive": 5,
        "accesslog": None,
        "errorlog": "-",
        "loglevel": "warning",
    }


class GunicornServer(BaseApplication):  # type: ignore[misc]
    """A gunicorn arbiter whose workers serve ``make()``'s app."""

    def __init__(
        self,
        make: Callable[[], ServeApp],
        options: dict[str, Any],
        grace: float,
        *,
        pin: bool = False,
    ) -> None:
        self._make = make
        self._options = options
        self.grace = grace
        self._pin = pin
        #: this worker's app, once gunicorn loaded it
        self.app: ServeApp | None = None
        super().__init__()

    def load_config(self) -> None:
        for key, value in self._options.items():
            self.cfg.set(key, value)
        _log_to_stderr()
        # gunicorn checks a hook's arity, so plain functions rather than methods
        server = self

        def post_worker_init(worker: Any) -> None:
            exit_now = worker.handle_exit
            app = server.app

            def on_term(signum: int, frame: Any) -> None:
                if app is not None:
                    app.begin_shutdown(server.grace)
                exit_now(signum, frame)

            signal.signal(signal.SIGTERM, on_term)

        def worker_exit(arbiter: Any, worker: Any) -> None:
            if server.app is not None:
                server.app.close()

        def when_ready(arbiter: Any) -> None:
            where = ", ".join(str(listener) for listener in arbiter.LISTENERS)
            print(f"navi-core serve: listening on {where} ({shape})", file=sys.stderr)
            sys.stderr.flush()

        workers, threads = self._options["workers"], self._options["threads"]
        shape = f"{workers} worker{'s' * (workers != 1)} x {threads} thread"
        shape += f"{'s' * (threads != 1)}{', pinned' if self._pin else ''}"
        self.cfg.set("post_worker_init", post_worker_init)
        self.cfg.set("worker_exit", worker_exit)
        self.cfg.set("when_ready", when_ready)
        if self._pin:
            pre_fork, post_fork = _pinning(sorted(os.sched_getaffinity(0)))
            self.cfg.set("pre_fork", pre_fork)
            self.cfg.set("post_fork", post_fork)

    def load(self) -> ServeApp:
        self.app = self._make()
        return self.app


class _StderrHandler(logging.StreamHandler):  # type: ignore[type-arg]
    """navi_core's records on stderr, secrets redacted."""


def _log_to_stderr() -> None:
    """navi_core's records of WARNING and above on stderr (the workers inherit it)."""
    logger = logging.getLogger("navi_core")
    if any(isinstance(h, _StderrHandler) for h in logger.handlers):
        return
    handler = _StderrHandler(sys.stderr)
    handler.setFormatter(
        logging.Formatter("[%(asctime)s] [%(process)d] [%(levelname)s] %(message)s")
    )
    handler.addFilter(SECRET_FILTER)
    logger.addHandler(handler)
    if logger.level == logging.NOTSET or logger.level > logging.WARNING:
        logger.setLevel(logging.WARNING)


def _pinning(
    cpus: list[int],
) -> tuple[Callable[[Any, Any], None], Callable[[Any, Any], None]]:
    """gunicorn's ``pre_fork`` and ``post_fork`` hooks that give each worker a CPU:
    the one fewest live workers have (the lowest of those), chosen in the arbiter, so
    a worker that replaces a dead one takes its CPU. A worker's threads share one GIL;
    on one core, the interpreter's state stays in that core's cache as it passes
    between them."""

    def pre_fork(arbiter: Any, worker: Any) -> None:
        used = Counter(getattr(w, "navi_cpu", None) for w in arbiter.WORKERS.values())
        worker.navi_cpu = min(cpus, key=lambda cpu: (used[cpu], cpu))

    def post_fork(arbiter: Any, worker: Any) -> None:
        os.sched_setaffinity(0, {worker.navi_cpu})  # the threads it starts inherit it

    return pre_fork, post_fork
