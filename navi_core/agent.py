"""``Agent``: owns the conversation, the tool registry, the config and the store session."""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from types import TracebackType
from typing import TYPE_CHECKING, Any, Literal

from .config import Config
from .conversation import (
    Conversation,
    Message,
    System,
    ToolResult,
    ToolUse,
    UserMessage,
    scrub_text,
)
from .dispatch import Dispatch, interrupted_results
from .events import Compacted
from .providers.base import Provider
from .store.base import SessionLock, SessionStore
from .store.memory import MemoryStore
from .stream import Phase, Stream
from .tools import Tool, ToolRegistry, ToolSource, ToolSpec

if TYPE_CHECKING:
    from .compaction import CompactionResult, PendingCompaction, SizeCache

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
        self.provider = provider
        self.store: SessionStore = store if store is not None else MemoryStore()
        self._config = config or Config()
        self._registry = ToolRegistry()
        for t in tools:
            if isinstance(t, ToolSource) and not isinstance(t, Tool):
                self._registry.register_source(t)
            else:
                self._registry.register_tool(t)
        self._mutex = threading.Lock()
        self._steering: list[Message] = []
        self._unsaved: list[Message] = []
        self._known_results: dict[str, ToolResult] = {}
        self._executor: ThreadPoolExecutor | None = None
        self._executor_size = 0
        self._sizes: SizeCache | None = None  # token estimates, kept between responses
        self._stream: Stream | None = None
        self._closed = False
        if session is None:
            info = self.store.create()
        elif session == "latest":
            info = self.store.latest() or self.store.create()
        else:
            info = self.store.get(session)
        self._lock: SessionLock | None = self.store.lock(info.id)
        try:
            self.conversation: Conversation = (
                self.store.load(info.id)
                if info.message_count
                else Conversation([], info.id)
            )
            self.conversation.session_id = info.id
            if system is not None and system != self.conversation.system_prompt():
                new_session = not self.conversation.messages
                self.add_system_message(system, "append" if new_session else "replace")
        except BaseException:
            self._lock.release()
            raise

    # -- configuration -----------------------------------------------------------------

    @property
    def session_id(self) -> str:
        """The id of the session this agent drives."""
        sid = self.conversation.session_id
        assert sid is not None
        return sid

    @property
    def config(self) -> Config:
        """The current config snapshot."""
        return self._config

    def set_config(self, config: Config) -> None:
        """Replace the config; a running turn picks it up at its next response."""
        self._config = config

    def register_tool(self, t: Tool | Callable[..., Any]) -> Tool:
        """Add a tool (a plain typed function is wrapped with ``@tool``)."""
        return self._registry.register_tool(t)

    def register_source(self, source: ToolSource) -> None:
        """Add every tool of a ``ToolSource``."""
        self._registry.register_source(source)

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The declarations sent to the model."""
        return self._registry.specs()

    def add_system_message(
        self, text: str, mode: Literal["append", "replace"] = "append"
    ) -> None:
        """Add a system prompt; "replace" discards the earlier ones. Persisted at once."""
        if mode not in ("append", "replace"):
            raise ValueError(f"mode must be 'append' or 'replace', not {mode!r}")
        self._commit(Message("system", (System(text, mode),)))

    def steer(self, text: str | Message) -> None:
        """Queue a user message that a running turn applies before its next response."""
        message = UserMessage(text) if isinstance(text, str) else text
        with self._mutex:
            self._steering.append(message)

    # -- turns -------------------------------------------------------------------------

    def run(self, prompt: str | Message) -> Stream:
        """Append and persist the user message, and return the turn's ``Stream``.

        No provider I/O happens here: the request opens on the first ``next()``.

        Raises:
            RuntimeError: another turn of this agent has not ended or been closed.
        """
        message = UserMessage(prompt) if isinstance(prompt, str) else prompt
        if message.role != "user":
            raise ValueError(
                f"run() takes a user message, not a {message.role} message"
            )
        self._check_idle()
        self._answer_dangling_calls()
        self._commit(message)
        return self._start()

    def resume(self) -> Stream:
        """Continue a turn that a crash interrupted, without a new user message.

        Calls that were in flight get error results saying so (a tool is never silently
        run twice); a trailing user prompt or tool-result message is answered. When the
        session ends with a finished assistant answer, the stream just completes.
        """
        self._check_idle()
        self._answer_dangling_calls()
        stream = self._start()
        last = self._last_dialogue_message()
        if last is None or last.role == "assistant":
            stream._last = last
            stream._finish_idle()
        return stream

    def _start(self) -> Stream:
        stream = Stream(self)
        self._stream = stream
        return stream

    def compact(self, extra_instructions: str | None = None) -> CompactionResult:
        """Summarise the old prefix now and keep the recent turns verbatim.

        Raises:
            NoCompactionPrompt: ``config.compaction.prompt`` is not set.
        """
        from .compaction import compact

        self._check_idle()
        return compact(self, self._config, extra_instructions)

    def close(self) -> None:
        """Persist what is pending, release the session and the tool threads."""
        if self._closed:
            return
        self._closed = True
        if self._stream is not None:
            self._stream.close()
        try:
            self._flush()
        finally:
            lock, self._lock = self._lock, None
            if lock is not None:
                lock.release()
            if self._executor is not None:
                self._executor.shutdown(wait=False, cancel_futures=True)

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
            f"{len(self.conversation)} tools={len(self._registry)} provider={self.provider!r}>"
        )

    # -- used by Stream ----------------------------------------------------------------

    def _check_idle(self) -> None:
        if self._closed:
            raise RuntimeError("this agent is closed")
        s = self._stream
        if (
            s is not None
            and not s._closed
            and s.phase not in (Phase.DONE, Phase.FAILED)
        ):
            raise RuntimeError(
                "a turn is still running; finish or close its stream first"
            )

    def _last_dialogue_message(self) -> Message | None:
        for m in reversed(self.conversation.messages):
            if m.role != "system":
                return m
        return None

    def _answer_dangling_calls(self) -> None:
        """Give error results to tool calls that never got any (crash, cancel, abort)."""
        last = self._last_dialogue_message()
        if last is None or last.role != "assistant":
            return
        uses: Sequence[ToolUse] = last.tool_uses
        if uses:
            known, self._known_results = self._known_results, {}
            self._commit(interrupted_results(uses, self.provider.wire, known))

    def _keep_results(self, results: dict[str, ToolResult]) -> None:
        """Results of calls that finished in a batch the turn abandoned."""
        self._known_results.update(results)

    def _commit(self, message: Message) -> None:
        """Append a message to the conversation and persist it at once."""
        if message.role != "assistant":
            message = scrub_text(message)
        if message.wire is None:
            message = message.with_wire(self.provider.wire)
        self.conversation.messages.append(message)
        self._unsaved.append(message)
        self._flush()

    def _flush(self) -> None:
        if self._unsaved:
            batch = list(self._unsaved)
            self.store.append(self.session_id, batch)
            del self._unsaved[: len(batch)]

    def _has_steering(self) -> bool:
        with self._mutex:
            return bool(self._steering)

    def _apply_steering(self) -> None:
        with self._mutex:
            steering, self._steering = self._steering, []
        for m in steering:
            self._commit(m)

    def _dispatch(self, uses: Sequence[ToolUse], config: Config) -> Dispatch:
        if self._executor is None or self._executor_size != config.max_tool_threads:
            if self._executor is not None:
                self._executor.shutdown(wait=False)
            self._executor = ThreadPoolExecutor(
                max_workers=config.max_tool_threads, thread_name_prefix="navi-tool"
            )
            self._executor_size = config.max_tool_threads
        return Dispatch(
            uses, self._registry, self._executor, config.images, self.provider.wire
        )

    def _plan_compaction(
        self, config: Config, *, reason: str, force: bool = False
    ) -> PendingCompaction | None:
        from .compaction import SizeCache, plan_compaction

        if self._sizes is None:
            self._sizes = SizeCache()
        return plan_compaction(
            self, config, reason=reason, force=force, cache=self._sizes
        )

    def _run_compaction(self, config: Config, pending: PendingCompaction) -> Compacted:
        from .compaction import run_compaction

        return run_compaction(self, config, pending)

    def _stream_closed(self, stream: Stream) -> None:
        self._flush()
