"""``navi-core serve``: agent sessions over HTTP, under gunicorn.

The store comes from the shared store flags, the model from the provider flags of
``navi-core run`` (or ``--demo``: a scripted model that needs no endpoint), the tools
from ``--workspace``. Tokens come from ``$NAVI_SERVE_TOKENS`` and ``--token-file``;
without any the server refuses to start unless ``--no-auth`` says so, and ``--no-auth``
binds only a loopback address unless ``--no-auth-beyond-loopback`` says otherwise. A
weak token (``auth.weak_token``) is served with a warning.
"""

from __future__ import annotations

import argparse
import ipaddress
import json
import os
import shutil
import socket
import sqlite3
import sys
import tempfile
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from .._extras import install_command
from ..config import Config
from ..conversation import Text, ToolResult, ToolUse, WireIdentity
from ..errors import NaviError
from ..providers.base import Provider, ProviderRequest, ProviderStream
from ..providers.scripted import Scripted
from ..store.base import SessionStore
from ..tools._tool import Tool, ToolSource
from ._data_dir import default_db
from .chat.command import open_provider
from .chat.profiles import ChatSettings, default_config_path, load_profile, load_tools
from .demo import demo_files
from .options import (
    ProviderChoice,
    Subcommands,
    UsageError,
    add_endpoint_arguments,
    add_store_arguments,
    error_line,
    postgres_store_class,
    provider_choice,
)
from .workspace import workspace_tools

if TYPE_CHECKING:  # the serve package needs the serve extra only when it runs
    from ..serve.app import ServeApp
    from ..serve.control import ControlBus

__all__ = ["command", "register"]


def register(subcommands: Subcommands) -> None:
    """Add ``serve`` with the store, provider, server and auth flags."""
    p = subcommands.add_parser(
        "serve",
        help="serve agent sessions over HTTP (gunicorn)",
        description="Serve sessions over HTTP with server-sent events, a web chat "
        "page at / and the API described at /openapi.json.",
    )
    server = p.add_argument_group("server")
    server.add_argument(
        "--bind",
        default="127.0.0.1:8000",
        metavar="HOST:PORT",
        help="the address to listen on (default: %(default)s)",
    )
    server.add_argument(
        "--workers",
        type=int,
        default=1,
        metavar="N",
        help="worker processes, each with its own threads (default: %(default)s)",
    )
    server.add_argument(
        "--threads",
        type=int,
        default=8,
        metavar="T",
        help="threads per worker that run turns and compactions (each worker keeps "
        "2 more for every other request)",
    )
    server.add_argument(
        "--grace",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="on SIGTERM, how long running turns may go on before they are cancelled",
    )
    server.add_argument(
        "--timeout",
        type=float,
        default=600.0,
        metavar="SECONDS",
        help="gunicorn's worker timeout (a silent worker is restarted)",
    )
    server.add_argument(
        "--max-body", type=int, default=1 << 20, metavar="BYTES", help="413 above this"
    )
    server.add_argument(
        "--read-timeout",
        type=float,
        default=10.0,
        metavar="SECONDS",
        help="a client that has begun a request but not sent its head (and again "
        "its body) within this long gets 408 and is cut; one that sent nothing is "
        "closed",
    )
    server.add_argument(
        "--send-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="a client that reads nothing of its answer for this long is cut",
    )
    server.add_argument(
        "--pin-workers",
        action="store_true",
        help="run each worker on a CPU of its own (Linux): its threads pass the GIL "
        "on one core",
    )
    auth = p.add_argument_group("authentication")
    auth.add_argument(
        "--token-file", metavar="FILE", help="accepted bearer tokens, one per line"
    )
    auth.add_argument(
        "--no-auth",
        action="store_true",
        help="serve without bearer tokens, on a loopback address only; other Host "
        "names, cross-site requests and bodies that are not JSON are refused",
    )
    auth.add_argument(
        "--no-auth-beyond-loopback",
        action="store_true",
        help="allow --no-auth on an address other hosts can reach",
    )
    auth.add_argument(
        "--allow-host",
        action="append",
        default=[],
        metavar="NAME",
        help="with --no-auth, a Host name to answer besides localhost and the bound "
        "address (repeatable)",
    )
    auth.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="ADDR",
        help="a proxy's address whose X-Real-IP header names the client, whose "
        "wrong tokens are then counted apart (repeatable)",
    )
    model = p.add_argument_group(
        "model endpoint: a chat profile (navi-core chat's TOML), or the flags of "
        "navi-core run, which win over it"
    )
    model.add_argument(
        "--config",
        metavar="FILE",
        help="the profiles file (default: as navi-core chat)",
    )
    model.add_argument("--profile", metavar="NAME", help="the profile to serve")
    model.add_argument("--model", metavar="M", help="the model to ask")
    add_endpoint_arguments(model)
    model.add_argument(
        "--demo",
        action="store_true",
        help="a scripted model: no endpoint, no key (its tools read a scratch folder "
        "of the demo's files unless --workspace names one)",
    )
    p.set_defaults(openai_base_url=None, anthropic_base_url=None)
    agent = p.add_argument_group("agent")
    agent.add_argument(
        "--workspace", metavar="DIR", help="file tools (list, read, count) in DIR"
    )
    agent.add_argument("--system", help="system prompt of new sessions")
    agent.add_argument(
        "--max-tokens",
        type=int,
        default=None,
        metavar="N",
        help="cap on each answer's output",
    )
    add_store_arguments(p)
    p.set_defaults(func=command)


class _DemoModel:
    """The demo's scripted model: it lists the workspace, then answers from what the
    listing returned, so the page shows an answer that quotes its tool's result."""

    def __init__(self) -> None:
        self._wire = Scripted(model="scripted-demo").wire

    @property
    def wire(self) -> WireIdentity:
        return self._wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        results = request.messages[-1].tool_results if request.messages else ()
        item: list[Text | ToolUse] | str
        if results:
            item = _demo_answer(results[0])
        else:
            item = [
                Text("Let me look at the workspace."),
                ToolUse("call_1", "list_dir", "{}"),
            ]
        return Scripted([item], model="scripted-demo").open(request)

    def close(self) -> None:
        pass


def _demo_answer(result: ToolResult) -> str:
    """The demo's final answer: what ``list_dir`` returned, in words."""
    text = result.text
    if result.is_error:
        return f"The listing failed: {text[:300]}"
    try:
        names = [str(n) for n in json.loads(text)]
    except (ValueError, TypeError):
        return f"The listing said: {text[:300]}"
    shown = ", ".join(f"`{n}`" for n in names) or "nothing"
    count = f"{len(names)} {'entry' if len(names) == 1 else 'entries'}"
    return (
        f"The workspace holds **{count}**: {shown}. "
        "(This is `navi-core serve --demo`: a scripted model, no endpoint.)"
    )


def _demo_provider() -> Provider:
    """A provider for one turn of the demo model."""
    return _DemoModel()


def profile_settings(args: argparse.Namespace) -> ChatSettings | None:
    """The chat profile to serve (provider, model, key variable, system, tools) with
    the flags laid over it; None when neither a profile nor a config file names one.

    Raises:
        UsageError: the profile cannot be used.
    """
    if args.demo:
        return None
    named = args.config is not None or args.profile is not None
    path = Path(args.config).expanduser() if args.config else default_config_path()
    s = load_profile(path, args.profile, explicit_path=args.config is not None)
    if not named and s.profile is None:
        return None
    if args.anthropic:
        s = replace(s, provider="anthropic")
    for flag in ("model", "base_url", "api_key_env", "system"):
        if (value := getattr(args, flag)) is not None:
            s = replace(s, **{flag: value})
    if args.workspace:
        s = replace(s, workspace=Path(args.workspace).resolve(), tools=("workspace",))
    if not s.model:
        raise UsageError(f"profile {s.profile!r} names no model: add one or --model M")
    return s


def _check(args: argparse.Namespace) -> ProviderChoice | None:
    if args.demo and args.model:
        raise UsageError("--demo and --model name two models: give one")
    if not args.demo and not args.model and profile_settings(args) is None:
        raise UsageError(
            "give --model M (and --base-url URL), --profile NAME, or --demo"
        )
    if args.workers < 1 or args.threads < 1:
        raise UsageError("--workers and --threads must be at least 1")
    if args.max_body < 1 or args.grace < 0:
        raise UsageError("--max-body must be positive and --grace not negative")
    if args.read_timeout <= 0 or args.send_timeout <= 0:
        raise UsageError("--read-timeout and --send-timeout must be positive")
    if args.pin_workers and not hasattr(os, "sched_setaffinity"):
        raise UsageError("--pin-workers needs Linux (os.sched_setaffinity)")
    host, sep, port = args.bind.rpartition(":")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise UsageError(f"--bind wants HOST:PORT, got {args.bind!r}")
    if args.no_auth and not args.no_auth_beyond_loopback and not _loopback(host):
        raise UsageError(
            f"--no-auth serves anyone who reaches {host}: bind a loopback address "
            "(127.0.0.1), or add --no-auth-beyond-loopback"
        )
    if args.demo or profile_settings(args) is not None:
        return None
    return provider_choice(args)


def _loopback(host: str) -> bool:
    """True when ``host`` (of ``--bind``) is reachable from this machine only."""
    name = host.strip("[]").lower()
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


def _hosts(args: argparse.Namespace) -> list[str] | None:
    """The ``Host`` names served without tokens (None with tokens: any)."""
    if not args.no_auth:
        return None
    from ..serve.guard import LOOPBACK_NAMES

    host = args.bind.rpartition(":")[0]
    return [*LOOPBACK_NAMES, host, *args.allow_host]


def _open_store(
    args: argparse.Namespace,
) -> tuple[SessionStore, Callable[[], ControlBus]]:
    """The worker's store and a maker of its control bus (both after the fork)."""
    dsn = args.postgres or (None if args.db else os.environ.get("NAVI_POSTGRES_DSN"))
    if dsn:
        cls = postgres_store_class(
            "--postgres" if args.postgres else "$NAVI_POSTGRES_DSN"
        )
        from ..serve.control import PostgresControl

        return cls(dsn, max_size=args.threads + 2), lambda: PostgresControl(dsn)
    from ..serve.control import SQLiteControl
    from ..store.sqlite import SQLiteStore

    db = args.db or os.environ.get("NAVI_DB") or str(default_db())
    return SQLiteStore(db), lambda: SQLiteControl(f"{db}.control")


def command(args: argparse.Namespace) -> int:
    """``navi-core serve``: runs until SIGTERM or SIGINT; 2 for bad flags, 1 when the
    store, the provider or the address fails before it listens."""
    try:
        from ..serve.auth import BearerAuth, tokens_from, weak_token
        from ..serve.server import GunicornServer, gunicorn_options
    except ImportError as exc:
        print(f"error: {exc} ({install_command('serve')})", file=sys.stderr)
        return 1
    try:
        choice = _check(args)
        tokens = tokens_from(args.token_file)
        if not tokens and not args.no_auth:
            raise UsageError(
                "no bearer token: set $NAVI_SERVE_TOKENS or --token-file, "
                "or pass --no-auth"
            )
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    except OSError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    auth = BearerAuth(tokens) if tokens and not args.no_auth else None
    weak = sum(weak_token(t) for t in tokens) if auth is not None else 0
    if weak:
        print(
            f"navi-core serve: warning: {weak} of {len(tokens)} bearer tokens "
            "are weak (shorter than 16 characters, or fewer than 8 different ones); "
            "make one with: python -c 'import secrets; "
            "print(secrets.token_urlsafe(32))'",
            file=sys.stderr,
        )
    config = Config(max_output_tokens=args.max_tokens)
    scratch: Path | None = None  # the demo's files, removed by the arbiter at exit
    try:
        profile = profile_settings(args)
        key_env = profile.api_key_env if profile is not None else None
        if key_env and not os.environ.get(key_env):
            raise UsageError(f"${key_env} (api_key_env) is not set")
        tools: Sequence[Tool | ToolSource]
        if profile is not None:
            tools = load_tools(profile.tools, profile.workspace)
        elif args.workspace:
            tools = workspace_tools(Path(args.workspace))
        elif args.demo:  # the demo's own files, not the folder it was started in
            scratch = Path(tempfile.mkdtemp(prefix="navi-serve-demo-"))
            demo_files(scratch)
            tools = workspace_tools(scratch)
            print(f"navi-core serve --demo: its tools read {scratch}", file=sys.stderr)
        else:
            tools = []
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2

    def make_app() -> ServeApp:
        from ..serve.app import ServeApp

        store, control = _open_store(args)
        with ExitStack() as opened:  # closed again when a later part fails
            opened.callback(store.close)
            bus = control()
            opened.callback(bus.close)
            if profile is not None:
                provider: Provider | None = open_provider(profile)  # key from its env
            else:
                provider = None if choice is None else choice.open()
            if provider is not None:
                opened.callback(provider.close)
            app = ServeApp(
                store,
                provider,
                provider_factory=_demo_provider if provider is None else None,
                tools=tools,
                config=config,
                system=profile.system if profile is not None else args.system,
                auth=auth,
                control=bus,
                max_body=args.max_body,
                hosts=_hosts(args),
                trusted_proxies=args.trusted_proxy,
            )
            opened.pop_all()
        return app

    arbiter = os.getpid()
    try:
        listener = _open_first(args, make_app)
        if isinstance(listener, int):
            return listener
        options = gunicorn_options(
            f"fd://{listener.detach()}",  # gunicorn owns the socket from here
            args.workers,
            args.threads,
            args.grace,
            args.timeout,
            read_timeout=args.read_timeout,
            send_timeout=args.send_timeout,
            max_body=args.max_body,
        )
        GunicornServer(make_app, options, args.grace, pin=args.pin_workers).run()
    except (NaviError, ValueError) as exc:
        print(error_line(exc), file=sys.stderr)
        return 1
    finally:
        # a worker leaves through here too (it was forked inside run()): not its to do
        if scratch is not None and os.getpid() == arbiter:
            shutil.rmtree(scratch, ignore_errors=True)
    return 0


def _open_first(
    args: argparse.Namespace, make_app: Callable[[], ServeApp]
) -> socket.socket | int:
    """Before gunicorn starts: open (and close) a worker's app, then bind ``--bind``;
    the listening socket, or the exit status after one ``error:`` line.

    What would fail in every worker alike (the store, the control table, the
    provider) or in gunicorn (an address in use) fails here instead, at once: status
    1 (2 for a usage error), and nothing says it listens.
    """
    from ..serve.server import listen_socket

    try:
        make_app().close()
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    except _setup_errors() as exc:
        print(error_line(exc, with_type=False), file=sys.stderr)
        return 1
    try:
        return listen_socket(args.bind)
    except OSError as exc:
        reason = (exc.strerror or str(exc)).lower()
        print(f"error: cannot listen on {args.bind}: {reason}", file=sys.stderr)
        return 1


def _setup_errors() -> tuple[type[Exception], ...]:
    """What opening the store, the control table or the provider raises when the
    setup is wrong (a path, a DSN, a base URL) rather than the code."""
    errors: list[type[Exception]] = [NaviError, ValueError, OSError, sqlite3.Error]
    try:
        import psycopg  # the postgres extra: its control table may fail on its own
    except ImportError:
        pass
    else:
        errors.append(psycopg.Error)
    return tuple(errors)
