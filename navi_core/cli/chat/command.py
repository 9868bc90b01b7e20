"""``navi-core chat``: an interactive terminal chat with a stored, resumable session.

Flags win over the profile (``chat_profiles``); the profile wins over the defaults.
The store comes from the shared ``--db`` / ``--postgres`` flags. The modules beside
this one hold the parts: ``chat_profiles`` (TOML profiles), ``chat_render`` (what a
turn looks like), ``chat_controller`` (the worker that drives turns), ``chat_commands``
(slash commands), ``chat_terminal`` (input) and ``chat_demo`` (``--demo``, offline).
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import os
import shutil
import sys
from dataclasses import replace
from pathlib import Path

from ..._extras import install_command
from ...agent import Agent
from ...compaction._compaction import DEFAULT_SUMMARY_PROMPT
from ...config import CompactionConfig, Config
from ...errors import NaviError
from ...providers.base import Provider
from ...store.base import SessionStore
from ...tools._tool import Tool, ToolSource
from .._terminal_text import terminal_safe_line
from ..options import (
    ProviderChoice,
    Subcommands,
    UsageError,
    add_request_arguments,
    add_store_arguments,
    check_extra_body,
    error_line,
    require_public_key,
    store_from_args,
)
from .commands import announce
from .controller import AgentFactory, ChatController
from .demo import DEMO_PRICE, DemoScript
from .profiles import ChatSettings, default_config_path, load_profile, load_tools
from .render import Painter, TurnView
from .terminal import default_history_path, run_plain, run_terminal, stdout_writer

__all__ = ["command", "open_provider", "register", "settings_from_args"]

_KEEP_VERBATIM = 2_000


def register(subcommands: Subcommands) -> None:
    """Add ``chat`` with its endpoint, profile and store flags."""
    p = subcommands.add_parser(
        "chat",
        help="an interactive chat in the terminal, stored and resumable",
        description="Chat with a model in the terminal: streamed answers, tool calls, "
        "Ctrl-C to cancel a turn, typing to steer it, /help for the commands.",
    )
    p.add_argument("--session", metavar="latest|ID", help="resume a stored session")
    p.add_argument("--model", metavar="M", help="the model (default: the profile's)")
    p.add_argument("--base-url", metavar="URL", help="the API's base URL")
    api = p.add_mutually_exclusive_group()
    api.add_argument(
        "--anthropic", action="store_true", help="speak the Anthropic Messages API"
    )
    api.add_argument(
        "--responses", action="store_true", help="speak the OpenAI Responses API"
    )
    p.add_argument(
        "--api-key-env", metavar="VAR", help="the variable that holds the API key"
    )
    p.add_argument(
        "--workspace", metavar="DIR", help="give the model file tools in this folder"
    )
    p.add_argument("--system", metavar="TEXT", help="the system prompt")
    p.add_argument(
        "--config",
        metavar="FILE",
        help="the profiles file (default ~/.config/navi-core/config.toml)",
    )
    p.add_argument("--profile", metavar="NAME", help="the profile to use")
    p.add_argument(
        "--demo", action="store_true", help="chat offline with a scripted model"
    )
    p.add_argument(
        "--keep-verbatim",
        type=int,
        default=_KEEP_VERBATIM,
        metavar="TOKENS",
        help="/compact keeps the recent turns that fit in TOKENS (default %(default)s)",
    )
    p.add_argument(
        "--history",
        metavar="FILE",
        help="the input history file (default: in ~/.local/state/navi-core)",
    )
    add_request_arguments(p)
    add_store_arguments(p)
    p.set_defaults(func=command)


def settings_from_args(args: argparse.Namespace) -> ChatSettings:
    """The profile's settings with the flags laid over them.

    Raises:
        UsageError: the profile cannot be used, or no model is named.
    """
    path = Path(args.config).expanduser() if args.config else default_config_path()
    s = load_profile(path, args.profile, explicit_path=args.config is not None)
    if args.anthropic:
        s = replace(s, provider="anthropic")
    elif args.responses:
        s = replace(s, provider="responses")
    for flag in ("model", "base_url", "api_key_env", "system", "max_tokens"):
        value = getattr(args, flag)
        if value is not None:
            s = replace(s, **{flag: value})
    if args.temperature is not None:
        s = replace(s, temperature=args.temperature)
    if args.extra_body is not None:  # merged over the profile's, key by key
        s = replace(s, extra_body={**s.extra_body, **args.extra_body})
    if args.mcp_config is not None:
        s = replace(s, mcp_config=Path(args.mcp_config).expanduser())
    if args.workspace:
        s = replace(s, workspace=Path(args.workspace).resolve(), tools=("workspace",))
    if args.demo:
        return replace(s, provider="demo", price=s.price or DEMO_PRICE)
    if not s.model:
        raise UsageError(
            "no model: give --model M, a profile with a model, or --demo to try offline"
        )
    if s.workspace is not None and not s.workspace.is_dir():
        raise UsageError(f"workspace {s.workspace} is not a folder")
    _check_key(s)  # now, before the store is opened; open_provider reads it later
    if s.extra_body:  # refused now, with the other flags, not at the first turn
        check_extra_body(_provider_class(s.provider), s.extra_body)
    return s


def _provider_class(name: str) -> type:
    module = importlib.import_module("navi_core")
    cls: type = {"anthropic": module.Anthropic, "openai": module.OpenAIChat}.get(
        name, getattr(module, "OpenAIResponses", module.OpenAIChat)
    )
    return cls


def _check_key(s: ChatSettings) -> str | None:
    """The API key the settings name, from the environment; None when the provider
    reads its own variable (or needs no key: a local server).

    Raises:
        UsageError: the named variable is unset or empty, or the public API is the
            endpoint and its own key variable is unset (``require_public_key``).
    """
    if s.api_key_env:
        api_key = os.environ.get(s.api_key_env) or None
        if api_key is None:
            raise UsageError(
                f"${s.api_key_env} is not set (the variable --api-key-env or the "
                "profile's api_key_env names for the API key)"
            )
        return api_key
    require_public_key(s.provider == "anthropic", s.base_url)
    return None


def open_provider(s: ChatSettings, demo: DemoScript | None = None) -> Provider:
    """The provider the settings name; the key is read from the environment now.

    Raises:
        UsageError: the key variable is unset (also the provider's own one, for a
            public API), or ``OpenAIResponses`` is missing.
        ValueError: the provider refuses the base URL.
    """
    if demo is not None:
        return demo.provider_for(s.model)
    api_key = _check_key(s)
    assert s.model is not None
    if s.provider == "responses":
        cls = getattr(importlib.import_module("navi_core"), "OpenAIResponses", None)
        if cls is None:
            raise UsageError(
                "--responses needs navi_core.OpenAIResponses, which this version of "
                "navi_core does not have; use the chat completions API (the default)"
            )
        extra = check_extra_body(cls, s.extra_body)
        provider: Provider = cls(s.model, base_url=s.base_url, api_key=api_key, **extra)
        return provider
    choice = ProviderChoice(
        s.model,
        anthropic=s.provider == "anthropic",
        base_url=s.base_url,
        api_key=api_key,
        extra_body=s.extra_body,
    )
    return choice.open()


def _factory(
    store: SessionStore,
    tools: list[Tool | ToolSource],
    config: Config,
    demo: DemoScript | None,
) -> AgentFactory:
    def open_agent(s: ChatSettings, session: str | None) -> Agent:
        provider = open_provider(s, demo)
        request = replace(
            config, max_output_tokens=s.max_tokens, temperature=s.temperature
        )
        try:
            return Agent(
                provider,
                tools=tools,
                store=store,
                session=session,
                system=s.system,
                config=request,
            )
        except BaseException:
            provider.close()
            raise

    return open_agent


def command(args: argparse.Namespace) -> int:
    """``navi-core chat``: 0 when the user leaves, 1 when it cannot start, 2 for flags."""
    try:
        settings = settings_from_args(args)
        if args.keep_verbatim < 0:
            raise UsageError("--keep-verbatim must not be negative")
    except UsageError as exc:
        print(error_line(exc), file=sys.stderr)
        return 2
    demo = DemoScript() if args.demo else None
    try:
        return _chat(args, settings, demo)
    finally:
        if demo is not None:
            demo.close()


def _chat(
    args: argparse.Namespace, settings: ChatSettings, demo: DemoScript | None
) -> int:
    tty = sys.stdin.isatty() and sys.stdout.isatty()
    if tty and importlib.util.find_spec("prompt_toolkit") is None:
        print(
            "error: navi-core chat needs prompt_toolkit on a terminal: "
            + install_command("chat"),
            file=sys.stderr,
        )
        return 1
    color = tty and not os.environ.get("NO_COLOR")
    painter = Painter(
        color=color, width=lambda: shutil.get_terminal_size().columns, wrap=tty
    )
    painter.preload()
    config = Config(
        compaction=CompactionConfig(
            keep_verbatim=args.keep_verbatim, prompt=DEFAULT_SUMMARY_PROMPT
        )
    )
    tools: list[Tool | ToolSource] = []
    try:
        tools = list(
            demo.tools
            if demo is not None
            else load_tools(settings.tools, settings.workspace)
        )
        if settings.mcp_config is not None:
            from .._mcp_config import open_mcp_servers  # the MCP client: httpx

            tools = [*tools, *open_mcp_servers(settings.mcp_config)]
        if settings.db and not args.db and not args.postgres:
            args.db = settings.db
        store = store_from_args(args)
    except (UsageError, NaviError) as exc:
        _close_sources(list(tools))
        print(error_line(exc), file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    view = TurnView(painter, stdout_writer, price=settings.price, live_rows=_live_rows)
    try:
        chat = ChatController(
            _factory(store, list(tools), config, demo),
            settings,
            store,
            view,
            painter,
            stdout_writer,
            session=args.session,
        )
    except (UsageError, NaviError, ValueError) as exc:
        store.close()
        _close_sources(list(tools))
        print(error_line(exc), file=sys.stderr)
        return 2 if isinstance(exc, UsageError) else 1
    if demo is not None:
        script = demo
        chat.before_turn = lambda prompt: script.feed(
            prompt, len(chat.agent.conversation.messages) * 40
        )
        chat.before_compact = script.feed_summary
    try:
        _banner(chat, settings, resumed=args.session is not None)
        if tty:
            history = Path(args.history) if args.history else default_history_path()
            return run_terminal(chat, history)
        return run_plain(chat, sys.stdin.readline)
    finally:
        try:
            chat.close()
        finally:
            store.close()
            _close_sources(list(tools))


def _live_rows() -> int:
    """The live area may take half the terminal's height."""
    return max(3, shutil.get_terminal_size().lines // 2)


def _close_sources(tools: list[Tool | ToolSource]) -> None:
    """Close the tool sources a profile opened (an MCP server's process, say)."""
    for t in tools:
        close = getattr(t, "close", None)
        if not isinstance(t, Tool) and callable(close):
            with contextlib.suppress(Exception):  # one that fails leaves none running
                close()


def _banner(chat: ChatController, s: ChatSettings, *, resumed: bool) -> None:
    agent = chat.agent
    p = chat.painter
    wire = agent.provider.wire
    where = "offline demo" if s.provider == "demo" else wire.base_url
    profile = f", profile {s.profile}" if s.profile else ""
    tools = len(agent.tool_specs())
    stdout_writer(
        p.style("1", "navi-core chat")
        + p.style(
            "2",
            f" · {wire.model} ({where}{profile}) · {tools} tools · "
            f"session {terminal_safe_line(agent.session_id[:12])} · /help\n",
        )
    )
    if resumed:
        announce(chat, "resumed")
