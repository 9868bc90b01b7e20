"""``Agent``: the facade that starts turns — provider, tools, config and steering —
and oversees them: hooks, observers, the request preview, decisions on held tool calls
and compaction by hand.

The conversation, its store and the session lock belong to ``Session``; a turn's
phase machine belongs to ``Stream``. The agent wires them together and is the
``TurnHost`` its streams talk to.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from types import TracebackType
from typing import Any, Literal, TypeVar, overload

from . import approvals
from ._ids import publish
from ._turn.extras import TurnExtras
from ._turn.planning import plan_step
from ._turn.steering import SteerDisposition, SteeringQueue
from ._turn.user_input import user_message
from .compaction._compaction import CompactionResult
from .compaction._manual import compact_now, plan_manual, stream_compaction
from .config import Config
from .conversation import Conversation, Message, ToolUse, UserMessage
from .errors import SteeringQueueFull
from .events import Event, TodoItem, TurnComplete
from .hooks import Hook, check_hooks
from .output import OutputSpec
from .providers.base import Provider, ProviderRequest, check_provider
from .session import Session
from .store.base import ApprovalState, SessionStore
from .store.memory import MemoryStore
from .stream import Stream
from .subscribe import Observers, Subscription
from .tools._dispatch import Dispatch
from .tools._runner import ToolRunner
from .tools._todo import TodoList
from .tools._tool import Tool, ToolRegistry, ToolSource, ToolSpec

__all__ = ["Agent"]

#: the type of a structured output (``run(..., output=T)``)
_T = TypeVar("_T")


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
        hooks: lifecycle hooks (``navi_core.hooks``), run in this order.

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
        hooks: Iterable[Hook] = (),
    ) -> None:
        self.provider = check_provider(provider)
        self._hooks = check_hooks(hooks)
        self._observers = Observers()
        self.store: SessionStore = store if store is not None else MemoryStore()
        self._config = config or Config()
        registry = ToolRegistry()
        for t in tools:
            if not isinstance(t, Tool) and isinstance(t, ToolSource):
                registry.register_source(t)
            else:
                registry.register_tool(t)
        self._tools = ToolRunner(registry)
        self._steering = SteeringQueue()
        self._stream: Stream | None = None
        # held from the idle check of run()/resume() until the new stream is set:
        # two threads starting a turn at once must not both pass the check
        self._start_lock = threading.Lock()
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
    def todos(self) -> tuple[TodoItem, ...]:
        """The todo list the model keeps through this agent's ``TodoList`` tool, as it
        last wrote it in this session: read from the history, so a resumed session
        shows it (empty when it wrote none, or without the tool)."""
        registry = self._tools.registry
        names = [n for n in registry.names() if isinstance(registry.owner(n), TodoList)]
        return self._session.todos(names)

    @property
    def steering(self) -> SteeringQueue:
        """User messages queued by ``steer`` and not yet applied."""
        return self._steering

    def tool_specs(self) -> tuple[ToolSpec, ...]:
        """The declarations sent to the model (those a ``ToolSearch`` chose, if any)."""
        return self._tools.registry.visible_specs()

    def next_request(self) -> ProviderRequest:
        """The request the next response opens with (``inspect``)."""
        conversation = self.conversation
        return ProviderRequest(
            conversation.history(),
            conversation.system_prompt(),
            self.tool_specs(),
            self._config,
        )

    def start_tools(
        self,
        calls: Sequence[ToolUse],
        factory: Callable[..., Dispatch],
        config: Config,
    ) -> Dispatch:
        """Start ``calls`` on the tool threads as a batch made by ``factory`` (used by
        the turn, which chose both)."""
        return self._tools.start(
            calls,
            config.max_tool_threads,
            config.images,
            self.provider.wire,
            self._session.id,
            factory=factory,
        )

    def turn_ended(self, turn_id: str) -> None:
        """Let go of the stream of a turn that ended (used by the turn): the agent and
        the stream no longer hold each other, so both are freed as soon as the host
        drops them, with no work left for the cyclic collector."""
        if self._stream is not None and self._stream.turn_id == turn_id:
            self._stream = None

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

    def steer(self, text: str | Message) -> SteerDisposition:
        """Queue a user message for the conversation (any thread).

        Returns ``QUEUED`` when a turn is running (it applies the message before its
        next response, returning ``Steered``), ``NEXT_TURN`` when none is (the next
        ``run()`` or ``resume()`` applies it before anything else). A message never
        applied is stored by ``close()``.

        Raises:
            SteeringQueueFull: ``Config.max_steering`` messages wait already.
            RuntimeError: the agent is closed.
            ValueError: ``text`` is a message whose role is not "user".
        """
        message = UserMessage(text) if isinstance(text, str) else text
        if message.role != "user":
            raise ValueError(f"steer() takes a user message, not a {message.role} one")
        if self._closed:
            raise RuntimeError("this agent is closed: a steered message would be lost")
        limit = self._config.max_steering
        disposition = self._steering.put(message, limit)
        if disposition is None:
            raise SteeringQueueFull(
                f"{limit} steering messages wait already (Config.max_steering)"
            )
        return disposition

    # -- oversight: hooks, observers, the request preview, held calls ------------------

    @property
    def hooks(self) -> tuple[Hook, ...]:
        """The lifecycle hooks, in the order they run."""
        return self._hooks

    @property
    def observers(self) -> Observers:
        """The subscriptions every turn publishes its events to."""
        return self._observers

    def add_hook(self, hook: Hook) -> None:
        """Add a lifecycle hook after the others; it runs from the next turn on."""
        self._hooks = (*self._hooks, *check_hooks([hook]))

    def subscribe(self, maxsize: int = 1024) -> Subscription:
        """Receive ``(turn_id, event)`` for every event of every later turn.

        Safe from any thread; the turn never waits for a slow reader, which reads
        ``Lagged(dropped)`` where events were dropped. ``close()`` it when done.
        """
        return self._observers.subscribe(maxsize)

    def inspect(self) -> ProviderRequest:
        """Exactly what the next response would be sent: dialogue, system prompt,
        tool declarations and config, as the provider receives them."""
        return self.next_request()

    def approve(self, call: approvals.CallRef) -> None:
        """Approve a held tool call; the next ``resume()`` runs it (exactly once).

        ``call`` names the call: an ``Approval`` from ``store.approvals(session_id)``
        or its ``key`` (bound to the call's place, turn, tool and arguments), a
        ``ToolUse`` of ``TurnComplete.pending_approvals`` (bound to its id, tool and
        arguments), or a bare call id. The decision is stored at once, so it holds
        across a crash or a restart.

        Raises:
            ApprovalMismatch: the call held is not the one ``call`` names (a model
                reused the id for another call); nothing was decided.
            ApprovalNotPending: no held call answers to ``call``, or it was denied.
        """
        approvals.decide(
            self._session.store, self._session.id, call, ApprovalState.APPROVED
        )

    def deny(self, call: approvals.CallRef, reason: str = "") -> None:
        """Deny a held tool call; the model reads that it was not approved, and why.

        ``call`` names the call as for ``approve``.

        Raises:
            ApprovalMismatch: the call held is not the one ``call`` names.
            ApprovalNotPending: no held call answers to ``call``, or it was approved.
        """
        approvals.decide(
            self._session.store, self._session.id, call, ApprovalState.DENIED, reason
        )

    # -- compaction by hand ------------------------------------------------------------

    def compact(
        self,
        extra_instructions: str | None = None,
        keep_turns: int | None = None,
        *,
        prompt: str | None = None,
    ) -> CompactionResult:
        """Summarise the old prefix now and keep the recent turns verbatim.

        ``keep_turns`` keeps that many recent turns whatever their size (else
        ``keep_verbatim`` tokens of them); ``prompt`` replaces the configured
        summary prompt for this call.

        The result carries the summary request's usage and cost.

        Raises:
            NoCompactionPrompt: no summary prompt is set or given.
        """
        self._check_idle()
        return compact_now(
            self._session,
            self.provider,
            self._config,
            self.tool_specs(),
            extra_instructions,
            keep_turns,
            prompt,
        )

    def compact_stream(
        self,
        extra_instructions: str | None = None,
        keep_turns: int | None = None,
        prompt: str | None = None,
    ) -> Iterator[Event]:
        """Compact now, as events: ``CompactionStarted``, then ``Compacted`` once the
        summary request returned (the iterator makes that request).

        Raises:
            NothingToCompact: fewer than two messages could be summarised (at once).
            NoCompactionPrompt: no summary prompt is set or given (at once).
            ProviderError: while iterating; the conversation is then unchanged.
        """
        self._check_idle()
        text, plan = plan_manual(self._session, self._config, keep_turns, prompt)
        return stream_compaction(
            self._session,
            self.provider,
            self._config,
            self.tool_specs(),
            text,
            plan,
            extra_instructions,
        )

    # -- turns -------------------------------------------------------------------------

    @overload
    def run(
        self, prompt: str | Message | Iterable[Any], *, output: None = None
    ) -> Stream[Any]: ...
    @overload
    def run(
        self, prompt: str | Message | Iterable[Any], *, output: type[_T]
    ) -> Stream[_T]: ...

    def run(
        self, prompt: str | Message | Iterable[Any], *, output: type[Any] | None = None
    ) -> Stream[Any]:
        """Persist the user message, append it, and return the turn's ``Stream``.

        ``prompt`` is text, a user ``Message``, or a list mixing text and images
        (``Media``, image bytes, Pillow images; see ``navi_core._turn.user_input``). No
        provider I/O happens here: the request opens on the first ``next()``.
        With ``output`` (a dataclass, TypedDict or pydantic model) the answer must be
        that type: ``TurnComplete.output`` holds it, validated.

        Raises:
            ValueError: the message cannot be sent or stored; nothing was appended.
            RuntimeError: another turn of this agent has not ended or been closed.
            SessionError: the store refused the prompt; the conversation is
                unchanged and ``run`` can be called again.
            TypeError: ``output`` is not a type that can be asked for.
            OutputValidationError: (from ``next()``) the answer stayed invalid after
                one corrective retry.
        """
        spec = OutputSpec.of(output) if output is not None else None
        if isinstance(prompt, Message) and prompt.role != "user":
            raise ValueError(f"run() takes a user message, not a {prompt.role} message")
        message = user_message(prompt, self._config.images)
        self._claim_start()
        try:
            self._check_idle()
            # the session's first turn: it holds no user or assistant message yet
            first = self._session.last_dialogue_message() is None
            self._answer_dangling()
            steered = self._apply_steering()
            # Stored before it joins the conversation: when the store fails, run()
            # raises and a retry does not send or store the prompt twice.
            message = self._session.commit_stored(message, self.provider.wire)
            return self._start(
                resume=False, steered=steered, prompt=message, output=spec, first=first
            )
        finally:
            self._start_lock.release()

    @overload
    def ask(
        self, prompt: str | Message | Iterable[Any], *, output: None = None
    ) -> TurnComplete[Any]: ...
    @overload
    def ask(
        self, prompt: str | Message | Iterable[Any], *, output: type[_T]
    ) -> TurnComplete[_T]: ...

    def ask(
        self, prompt: str | Message | Iterable[Any], *, output: type[Any] | None = None
    ) -> TurnComplete[Any]:
        """Run a turn to its end and return its ``TurnComplete``: ``run(...)``, then
        ``Stream.result()``, the stream closed after.

        Raises:
            Exception: what ``run`` raises, or what the turn raised.
        """
        with self.run(prompt, output=output) as stream:
            return stream.result()

    @overload
    def resume(self, *, output: None = None) -> Stream[Any]: ...
    @overload
    def resume(self, *, output: type[_T]) -> Stream[_T]: ...

    def resume(self, *, output: type[Any] | None = None) -> Stream[Any]:
        """Continue a turn that a crash interrupted, without a new user message.

        Calls that were in flight get error results saying so (a tool is never silently
        run twice); a trailing user prompt or tool-result message is answered. When the
        session ends with a finished assistant answer, the stream just completes.

        A batch held for approval goes on here: each approved call runs exactly once
        (claimed in the store first, so two resuming processes never both run it),
        denied calls get their reason; while a call is undecided the stream ends
        again with ``StopReason.APPROVAL_REQUIRED``.

        ``output`` asks for the answer as that type, as ``run(..., output=T)`` does:
        pass the type the interrupted turn asked for (it is not stored).

        Raises:
            TypeError: ``output`` is not a type that can be asked for.
        """
        spec = OutputSpec.of(output) if output is not None else None
        self._claim_start()
        try:
            self._check_idle()
            held = approvals.plan_resume(self._session)
            if held is not None:  # steering waits until the batch has its results
                return self._start(resume=True, steered=(), held=held, output=spec)
            self._session.answer_dangling_calls(self.provider.wire)
            return self._start(resume=True, steered=self._apply_steering(), output=spec)
        finally:
            self._start_lock.release()

    def close(self) -> None:
        """Persist what is pending, release the session and the tool threads."""
        if self._closed:
            return
        self._closed = True
        self._observers.close()
        try:
            if self._stream is not None:
                self._stream.close()
            if self._steering:  # never applied: keep them for the next driver
                self._answer_dangling()
                self._apply_steering()
                self._session.flush()
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

    def _start(
        self,
        *,
        resume: bool,
        steered: Sequence[Message],
        prompt: Message | None = None,
        held: approvals.ResumePlan | None = None,
        output: OutputSpec | None = None,
        first: bool = False,
    ) -> Stream:
        session = self._session
        plan = plan_step(session, self.provider, self._config, prompt)
        x = TurnExtras(
            session,
            self._hooks,
            self._observers,
            plan=plan,
            resume_plan=held,
            prompt=prompt,
            first=first,
        )
        self._steering.begin_turn()
        self._stream = stream = Stream(
            self, resume=resume, steered=steered, extras=x, output=output
        )
        return stream

    def _answer_dangling(self) -> None:
        """Give results to the last message's unanswered calls before a new user
        message: a held batch keeps the results it has, its other calls did not run."""
        wire = self.provider.wire
        settled = approvals.settle_for_new_turn(self._session, wire)
        if settled is not None:
            self._session.commit(settled, wire)
            approvals.clear(self._session)
        self._session.answer_dangling_calls(wire)

    def _apply_steering(self) -> list[Message]:
        """Commit the waiting steering messages, oldest first, and return them."""
        messages = self._steering.take()
        for m in messages:
            self._session.commit(m, self.provider.wire)
        return messages

    def _claim_start(self) -> None:
        """Take the start lock (the caller releases it once its turn started):
        another thread starting a turn at the same time gets a ``RuntimeError``, as
        a running turn gives."""
        if not self._start_lock.acquire(blocking=False):
            raise RuntimeError(
                "another thread is starting a turn of this agent; drive an agent "
                "from one thread at a time"
            )

    def _check_idle(self) -> None:
        if self._closed:
            raise RuntimeError("this agent is closed")
        if self._stream is not None and self._stream.running:
            raise RuntimeError(
                "a turn is still running; finish or close its stream first"
            )


publish(globals())
