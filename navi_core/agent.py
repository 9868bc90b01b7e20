"""``Agent``: the facade that starts turns — provider, tools, config and steering.

The conversation, its store and the session lock belong to ``Session``; a turn's
phase machine belongs to ``Stream``. The agent wires them together and is the
``TurnHost`` its streams talk to.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from types import TracebackType
from typing import Any, Literal

from .compaction import CompactionResult, compact
from .config import Config
from .conversation import Conversation, Message, ToolUse, UserMessage
from .dispatch import Dispatch, ToolRunner
from .providers.base import Provider, check_provider
from .session import Session
from .steering import SteeringQueue
from .store.base import SessionStore
from .store.memory import MemoryStore
from .stream import Stream
from .tools import Tool, ToolRegistry, ToolSource, ToolSpec
from .user_input import user_message

__all__ = ["Agent"]


class Agent:
    """Drives turns against one provider, with tools, persisting to one session.

    Args:
        provider: the model endpoint (``OpenAIChat``, ``Anthropic``, ``Scripted``...).
        tools: ``Tool`` values, ``ToolSource`` values or plain typed functions.
        store: where the session lives; a ``MemoryStore`` by default.
        session: None starts a new session, "latest" resumes the most recent one,
            anything else is a session id or unique id prefix.
        system: the system prompt; added to a new session, and replacing the
            stored one when a resumed session has a different prompt.
        config: loop settings; ``set_config`` replaces them between responses.

    Raises:
        SessionBusy: another agent drives that session.
        SessionNotFound, AmbiguousSession: ``session`` names no single session.
    """

    def __init__(
        self,
        provider: Provider,
        *,
        tools: Iterable[Tool | ToolSource | Callable[..., Any]] = (),
        store: SessionStore | None = None,
        session: str | None = None,
        system: str | None = None,
        config: Config | None = None,
    ) -> None:
        self.provider = check_provider(provider)
        self.store: SessionStore = store if store is not None else MemoryStore()
        self._config = config or Config()
        registry = ToolRegistry()
        for t in tools:
            if isinstance(t, ToolSource) and not isinstance(t, Tool):
                registry.register_source(t)
            else:
                registry.register_tool(t)
        self._tools = ToolRunner(registry)
        self._steering = SteeringQueue()
        self._stream: Stream | None = None
        self._closed = False
        self._session = Session.open(self.store, session)
        try:
            if system is not None and system != self.conversation.system_prompt():
                new_session = not self.conversation.messages
                self.add_system_message(system, "append" if new_session else "replace")
        except BaseException:
            self._session.close()
            raise

    # -- what a turn reads (the TurnHost protocol) ----------------------------------------

    @property
    def session(self) -> Session:
        """The stored conversation this agent drives."""
        return self._session

    @property
    def session_id(self) -> str:
        """The id of the session this agent drives."""
        return self._session.id

    @property
    def conversation(self) -> Conversation:
        """The live conversation; ``conversation.messages`` is the list of messages."""
        return self._session.conversation

    @property
    def config(self) -> Config:
        """The current config snapshot."""
        return self._config

    @property
    def steering(self) -> SteeringQueue:
        """User messages queued by ``steer`` and not yet applied."""
        return self._steering

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The declarations sent to the model."""
        return self._tools.registry.specs()

    def start_tools(self, uses: Sequence[ToolUse], config: Config) -> Dispatch:
        """Start a response's tool calls on the tool threads (used by ``Stream``)."""
        return self._tools.start(
            uses, config.max_tool_threads, config.images, self.provider.wire
        )

    # -- configuration -----------------------------------------------------------------

    def set_config(self, config: Config) -> None:
        """Replace the config; a running turn picks it up at its next response."""
        self._config = config

    def register_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain typed function is wrapped with ``@tool``)."""
        return self._tools.registry.register_tool(t)

    def register_source(self, source: ToolSource) -> None:
        """Add every tool of a ``ToolSource``."""
        self._tools.registry.register_source(source)

    def add_system_message(
        self, text: str, mode: Literal["append", "replace"] = "append"
    ) -> None:
        """Add a system prompt; "replace" discards the earlier ones. Persisted at once."""
        self._session.add_system(text, mode, self.provider.wire)

    def steer(self, text: str | Message) -> None:
        """Queue a user message that a running turn applies before its next response."""
        self._steering.put(UserMessage(text) if isinstance(text, str) else text)

    # -- turns -------------------------------------------------------------------------

    def run(self, prompt: str | Message | Iterable[Any]) -> Stream:
        """Append and persist the user message, and return the turn's ``Stream``.

        ``prompt`` is text, a user ``Message``, or a list mixing text and images
        (``Media``, image bytes, Pillow images; see ``navi_core.user_input``). No
        provider I/O happens here: the request opens on the first ``next()``.

        Raises:
            ValueError: the message cannot be sent or stored; nothing was appended.
            RuntimeError: another turn of this agent has not ended or been closed.
        """
        if isinstance(prompt, Message) and prompt.role != "user":
            raise ValueError(f"run() takes a user message, not a {prompt.role} message")
        message = user_message(prompt, self._config.images)
        self._check_idle()
        self._session.answer_dangling_calls(self.provider.wire)
        self._session.commit(message, self.provider.wire)
        return self._start(resume=False)

    def resume(self) -> Stream:
        """Continue a turn that a crash interrupted, without a new user message.

        Calls that were in flight get error results saying so (a tool is never silently
        run twice); a trailing user prompt or tool-result message is answered. When the
        session ends with a finished assistant answer, the stream just completes.
        """
        self._check_idle()
        self._session.answer_dangling_calls(self.provider.wire)
        return self._start(resume=True)

    def compact(self, extra_instructions: str | None = None) -> CompactionResult:
        """Summarise the old prefix now and keep the recent turns verbatim.

        Raises:
            NoCompactionPrompt: ``config.compaction.prompt`` is not set.
        """
        self._check_idle()
        return compact(self._session, self.provider, self._config, extra_instructions)

    def close(self) -> None:
        """Persist what is pending, release the session and the tool threads."""
        if self._closed:
            return
        self._closed = True
        try:
            if self._stream is not None:
                self._stream.close()
        finally:
            try:
                self._session.close()
            finally:
                self._tools.shutdown()

    def __enter__(self) -> Agent:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"<Agent session={self.conversation.session_id} messages="
            f"{len(self.conversation)} tools={len(self._tools.registry)} "
            f"provider={self.provider!r}>"
        )

    def _start(self, *, resume: bool) -> Stream:
        stream = Stream(self, resume=resume)
        self._stream = stream
        return stream

    def _check_idle(self) -> None:
        if self._closed:
            raise RuntimeError("this agent is closed")
        if self._stream is not None and self._stream.running:
            raise RuntimeError(
                "a turn is still running; finish or close its stream first"
            )
