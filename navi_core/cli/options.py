"""The flags every command shares, defined once: the store, the provider, the errors.

Every command that opens sessions takes ``--db FILE`` / ``--postgres DSN``
(``add_store_arguments``, ``store_from_args``); every command that talks to a model
takes ``--model M``, ``--base-url URL``, ``--anthropic`` and ``--api-key-env VAR``
(``add_provider_arguments``, ``provider_choice``). A failure is one ``error:`` line on
stderr (``error_line``) and never shows a key or a password.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol
from urllib.parse import urlsplit

from .._secrets import public_url
from ..errors import NaviError, SessionError
from ..providers.base import Provider
from ..store.base import SessionStore
from ._data_dir import default_db
from ._terminal_text import terminal_safe

if TYPE_CHECKING:  # psycopg is an optional extra: imported when a DSN is given
    from ..store.postgres import PostgresStore

__all__ = [
    "Command",
    "ProviderChoice",
    "StoreExtraMissing",
    "Subcommands",
    "UsageError",
    "add_provider_arguments",
    "add_request_arguments",
    "add_store_arguments",
    "check_extra_body",
    "error_line",
    "help_command",
    "parse_extra_body",
    "postgres_store_class",
    "provider_choice",
    "require_public_key",
    "store_and_provider",
    "store_from_args",
]

Command = Callable[[argparse.Namespace], int]
"""What a sub-command runs: the parsed arguments in, the exit status out."""


class Subcommands(Protocol):
    """What ``ArgumentParser.add_subparsers()`` returns, as far as a command needs."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser: ...


class UsageError(Exception):
    """The flags contradict each other or name something missing (exit status 2)."""


class StoreExtraMissing(SessionError):
    """The store that the flags or the environment name needs an extra that is not
    installed (PostgreSQL without psycopg); the message says which and how to add it.

    A ``SessionError``, so every command reports it as a store that cannot be opened:
    one ``error:`` line (without the class name) and exit status 1.
    """


def error_line(exc: BaseException, *, with_type: bool = True) -> str:
    """``exc`` as one ``error:`` line; with ``with_type`` a NaviError names its class.

    Provider and store errors never hold a key or a password, so their text is shown;
    it may quote a server's body, so its controls are shown as marks (``terminal_safe``).
    """
    text = terminal_safe(" ".join(str(exc).split()))
    if (
        with_type
        and isinstance(exc, NaviError)
        and not isinstance(exc, StoreExtraMissing)
    ):
        return f"error: {type(exc).__name__}: {text}"
    return f"error: {text}"


def help_command(parser: argparse.ArgumentParser) -> Command:
    """A command that prints ``parser``'s help on stderr and returns 2.

    What ``navi-core`` or ``navi-core sessions`` does when no command is named: as
    argparse does for a missing argument, but with the whole help.
    """

    def show_help(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show_help


# -- the store ---------------------------------------------------------------------


def add_store_arguments(parser: argparse.ArgumentParser) -> None:
    """Add the store flags, ``--db FILE`` and ``--postgres DSN``, to ``parser``.

    Both default to None so that ``store_from_args`` can tell a flag given on the
    command line from the environment, which only fills in when neither is given.
    """
    group = parser.add_argument_group("session store")
    group.add_argument(
        "--db",
        metavar="FILE",
        help="SQLite file; with neither --db nor --postgres: $NAVI_POSTGRES_DSN if "
        "set, else $NAVI_DB, else navi.db in the user's data directory",
    )
    group.add_argument(
        "--postgres",
        metavar="DSN",
        help="PostgreSQL DSN instead of SQLite (wins over --db)",
    )


def store_from_args(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> SessionStore:
    """Open the store that ``add_store_arguments``' flags and the environment name.

    Flags win over the environment. In order: ``--postgres DSN``, ``--db FILE``,
    ``$NAVI_POSTGRES_DSN``, ``$NAVI_DB``, then ``navi.db`` in the user's data
    directory (``_data_dir.default_db``, created on first use).
    ``environ`` defaults to ``os.environ``; an empty variable counts as unset.

    Raises:
        SessionError: the database cannot be opened; ``StoreExtraMissing`` when it
            is PostgreSQL and psycopg is not installed.
    """
    env = os.environ if environ is None else environ
    dsn: str | None = getattr(args, "postgres", None)
    db: str | None = getattr(args, "db", None)
    if not dsn and not db:
        dsn = env.get("NAVI_POSTGRES_DSN") or None
        db = env.get("NAVI_DB") or (None if dsn else str(default_db()))
    if dsn:
        given = getattr(args, "postgres", None)
        cls = postgres_store_class("--postgres" if given else "$NAVI_POSTGRES_DSN")
        return cls(dsn, max_size=2)
    from ..store.sqlite import SQLiteStore

    assert db is not None
    return SQLiteStore(db)


def postgres_store_class(source: str) -> type[PostgresStore]:
    """``PostgresStore``, imported now: psycopg is the optional ``postgres`` extra.

    ``source`` names what asked for PostgreSQL (``--postgres``,
    ``$NAVI_POSTGRES_DSN``), for the message.

    Raises:
        StoreExtraMissing: psycopg (or psycopg_pool) cannot be imported; the message
            names the pip command that adds the extra to this install.
    """
    try:
        from ..store.postgres import PostgresStore
    except ImportError:
        from .._extras import install_command

        raise StoreExtraMissing(
            f"{source} names a PostgreSQL store, which needs the postgres extra "
            f"(psycopg 3 and psycopg_pool): {install_command('postgres')}"
        ) from None
    return PostgresStore


# -- the provider ------------------------------------------------------------------


def add_provider_arguments(
    parser: argparse.ArgumentParser, *, model_help: str = "the model to ask"
) -> None:
    """Add ``--model``, ``--base-url``, ``--anthropic`` and ``--api-key-env``.

    ``--openai-base-url URL`` and ``--anthropic-base-url URL`` (which implies
    ``--anthropic``) are hidden older spellings of ``--base-url``, kept working.
    """
    group = parser.add_argument_group("model endpoint")
    group.add_argument("--model", required=True, metavar="M", help=model_help)
    add_endpoint_arguments(group)
    group.add_argument("--openai-base-url", metavar="URL", help=argparse.SUPPRESS)
    group.add_argument("--anthropic-base-url", metavar="URL", help=argparse.SUPPRESS)


class _Arguments(Protocol):
    """A parser or an argument group: what takes ``add_argument``."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def add_endpoint_arguments(group: _Arguments) -> None:
    """Add ``--base-url``, ``--anthropic`` and ``--api-key-env`` to ``group`` (every
    command that talks to a model, ``serve`` included, explains them alike)."""
    group.add_argument(
        "--base-url",
        metavar="URL",
        help="the API's base URL: an OpenAI-compatible one ends in /v1 (default "
        "$OPENAI_BASE_URL, else https://api.openai.com/v1); with --anthropic, one "
        "without /v1 (default $ANTHROPIC_BASE_URL, else https://api.anthropic.com)",
    )
    group.add_argument(
        "--anthropic",
        action="store_true",
        help="speak the Anthropic Messages API instead of OpenAI chat completions",
    )
    group.add_argument(
        "--api-key-env",
        metavar="VAR",
        help="the environment variable that holds the API key (default "
        "OPENAI_API_KEY, or ANTHROPIC_API_KEY with --anthropic); a key is never "
        "taken on the command line",
    )


@dataclass(frozen=True)
class ProviderChoice:
    """The endpoint that the provider flags name, checked but not connected yet.

    ``api_key`` is None when the provider's own variable (``OPENAI_API_KEY``,
    ``ANTHROPIC_API_KEY``) is to be read; it is never shown in the repr.
    """

    model: str
    anthropic: bool = False
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    extra_body: Mapping[str, Any] = field(default_factory=dict)

    def open(self) -> Provider:
        """The provider; the caller closes it.

        Raises:
            ValueError: the provider refuses the base URL.
            UsageError: ``extra_body`` names a field the provider sets itself.
        """
        if self.anthropic:
            from ..providers.anthropic import Anthropic

            extra = check_extra_body(Anthropic, self.extra_body)
            return Anthropic(
                self.model, base_url=self.base_url, api_key=self.api_key, **extra
            )
        from ..providers.openai_chat import OpenAIChat

        extra = check_extra_body(OpenAIChat, self.extra_body)
        return OpenAIChat(
            self.model, base_url=self.base_url, api_key=self.api_key, **extra
        )


def provider_choice(
    args: argparse.Namespace, environ: Mapping[str, str] | None = None
) -> ProviderChoice:
    """Read ``add_provider_arguments``' flags; ``environ`` defaults to ``os.environ``.

    Raises:
        UsageError: the flags name two APIs or two base URLs, a base URL that is
            not http(s), ``--api-key-env`` names a variable that is unset or empty,
            or the public API is asked without its key (``require_public_key``).
    """
    openai_url: str | None = args.openai_base_url
    anthropic_url: str | None = args.anthropic_base_url
    anthropic = bool(args.anthropic) or anthropic_url is not None
    if openai_url is not None and anthropic:
        other = "--anthropic" if args.anthropic else "--anthropic-base-url"
        raise UsageError(
            f"--openai-base-url and {other} name two different APIs: give one, not both"
        )
    urls = [u for u in (args.base_url, openai_url, anthropic_url) if u is not None]
    if len(urls) > 1:
        raise UsageError("give one base URL (--base-url), not both")
    if urls and not urls[0].startswith(("http://", "https://")):
        raise UsageError(
            f"the base URL must start with http:// or https://: "
            f"{public_url(urls[0])!r} (e.g. http://127.0.0.1:11434/v1)"
        )
    api_key = None
    var: str | None = args.api_key_env
    env = os.environ if environ is None else environ
    if var is not None:
        api_key = env.get(var) or None
        if api_key is None:
            raise UsageError(f"--api-key-env: ${var} is not set")
    else:
        require_public_key(anthropic, urls[0] if urls else None, env)
    return ProviderChoice(
        model=args.model,
        anthropic=anthropic,
        base_url=urls[0] if urls else None,
        api_key=api_key,
    )


#: the hosts of the public APIs, which answer nothing without a key
_PUBLIC_HOSTS = frozenset({"api.openai.com", "api.anthropic.com"})


def require_public_key(
    anthropic: bool, base_url: str | None, environ: Mapping[str, str] | None = None
) -> None:
    """Refuse to ask a public API (OpenAI's, Anthropic's) without its key.

    For the provider's own key variable (``OPENAI_API_KEY``, or ``ANTHROPIC_API_KEY``
    with ``anthropic``), when no other variable was named: ``base_url`` None means
    the provider's default (``$OPENAI_BASE_URL`` / ``$ANTHROPIC_BASE_URL``, else the
    public API). A local server, which may need no key (Ollama, llama.cpp), passes.

    Raises:
        UsageError: the public API is the endpoint and the variable is unset or empty.
    """
    env = os.environ if environ is None else environ
    prefix = "ANTHROPIC" if anthropic else "OPENAI"
    url = base_url or env.get(f"{prefix}_BASE_URL") or None
    if url is not None:
        try:
            host = (urlsplit(url).hostname or "").rstrip(".").lower()
        except ValueError:
            return  # the provider says what is wrong with it
        if host not in _PUBLIC_HOSTS:
            return
    if not env.get(f"{prefix}_API_KEY"):
        raise UsageError(
            f"${prefix}_API_KEY is not set (export it, or give --base-url for a "
            "local server that needs none)"
        )


# -- what every request carries ---------------------------------------------------

#: body fields the provider writes from the conversation and the flags
_OWN_FIELDS = frozenset({"model", "messages", "input", "stream", "system"})
#: constructor keywords that are body fields too (Anthropic's ``max_tokens``...)
_BODY_KEYWORDS = frozenset({"max_tokens", "thinking"})


def add_request_arguments(parser: argparse.ArgumentParser) -> None:
    """Add ``--max-tokens N``, ``--temperature X``, ``--extra-body JSON`` and
    ``--mcp-config FILE``; each defaults to None (not given)."""
    group = parser.add_argument_group("request")
    group.add_argument(
        "--max-tokens",
        type=_positive_int,
        metavar="N",
        help="cap on each answer's output",
    )
    group.add_argument(
        "--temperature", type=_temperature, metavar="X", help="sampling temperature"
    )
    group.add_argument(
        "--extra-body",
        type=parse_extra_body,
        metavar="JSON",
        help="a JSON object merged into every request body, e.g. '{\"top_p\": 0.9}'",
    )
    group.add_argument(
        "--mcp-config",
        metavar="FILE",
        help='MCP servers as in Claude Desktop: {"mcpServers": {"name": {"command": '
        '..., "args": [...], "env": {...}} or {"url": ..., "headers": {...}}}}',
    )


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def _temperature(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if not 0.0 <= value <= 2.0:
        raise argparse.ArgumentTypeError("must be between 0 and 2")
    return value


def parse_extra_body(text: str) -> dict[str, Any]:
    """``--extra-body``'s JSON object.

    Raises:
        argparse.ArgumentTypeError: not JSON, or not an object.
    """
    import json

    try:
        value = json.loads(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(
            "must be a JSON object, e.g. '{\"top_p\": 0.9}'"
        )
    return value


def check_extra_body(cls: type, extra: Mapping[str, Any]) -> dict[str, Any]:
    """``extra`` as keyword options of provider ``cls``, which copies them into every
    request body.

    Raises:
        UsageError: a field the provider writes itself (``model``, ``messages``...),
            or a name that is one of ``cls``'s own settings (``timeout``...).
    """
    import inspect

    settings = {
        name
        for name, param in inspect.signature(cls).parameters.items()
        if param.kind is not param.VAR_KEYWORD
    } - _BODY_KEYWORDS
    for key in extra:
        if key in _OWN_FIELDS:
            raise UsageError(f"extra body: {key!r} is written by the chat itself")
        if key in settings:
            raise UsageError(
                f"extra body: {key!r} is a setting of {cls.__name__}, "
                "not a request field"
            )
    return dict(extra)


@contextmanager
def store_and_provider(
    args: argparse.Namespace, choice: ProviderChoice
) -> Iterator[tuple[SessionStore, Provider]]:
    """Open the store (``store_from_args``), then the provider; close both on exit.

    Raises:
        SessionError: the store cannot be opened (nothing is left open).
        ValueError: the provider refuses the base URL (the store is closed).
    """
    with ExitStack() as resources:
        store = store_from_args(args)
        resources.callback(store.close)
        provider = choice.open()
        resources.callback(provider.close)
        yield store, provider
