"""``ChatController``: one agent, one worker thread that drives its turns and commands.

The terminal thread only reads input. Everything that touches the agent (a turn, a
slash command, switching session or model) is a job run in order on the worker, so
the agent is driven from one thread at a time. What may cross threads does so through
the public thread-safe calls: ``Agent.steer`` (typing while an answer streams) and
``Stream.cancel`` (Ctrl-C), which ends the turn within 100 ms.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from ..._turn.steering import SteerDisposition
from ...agent import Agent
from ...conversation import Usage
from ...errors import NaviError, SteeringQueueFull
from ...events import Steered, StopReason, TurnComplete
from ...store.base import SessionStore
from ...stream import Stream
from .._terminal_text import terminal_safe
from ..options import error_line
from .profiles import ChatSettings
from .render import Painter, TurnView

__all__ = ["AgentFactory", "ChatController", "SessionTotals"]

AgentFactory = Callable[[ChatSettings, "str | None"], Agent]
"""Opens an agent for the settings on a session (None: a new one)."""
Job = Callable[[], None]


@dataclass
class SessionTotals:
    """What this chat spent: turns run and their summed usage."""

    turns: int = 0
    usage: Usage = field(default_factory=Usage)


class ChatController:
    """Runs turns and commands on a worker thread; safe to call from the terminal."""

    def __init__(
        self,
        factory: AgentFactory,
        settings: ChatSettings,
        store: SessionStore,
        view: TurnView,
        painter: Painter,
        out: Callable[[str], None],
        *,
        session: str | None = None,
    ) -> None:
        self.factory = factory
        self.settings = settings
        self.store = store
        self.view = view
        self.painter = painter
        self.out = out
        self.totals = SessionTotals()
        #: turns that ended in an error (piped chat exits 1 when any did)
        self.failed_turns = 0
        #: called on the worker before each turn (the demo scripts its answer here)
        self.before_turn: Callable[[str | None], None] | None = None
        #: called on the worker before ``/compact`` asks for a summary
        self.before_compact: Callable[[], None] | None = None
        self._lock = threading.Lock()
        self._stream: Stream | None = None
        self._steers_sent = 0
        self._steers_applied = 0
        self._jobs: queue.Queue[Job | None] = queue.Queue()
        self._closing = threading.Event()
        self.agent: Agent = factory(settings, session)
        self._worker = threading.Thread(
            target=self._work, name="navi-chat-turns", daemon=True
        )
        self._worker.start()

    # -- called from the terminal thread -------------------------------------------

    @property
    def turn_running(self) -> bool:
        """True while a turn streams (typed text then steers it)."""
        with self._lock:
            return self._stream is not None

    def say(self, text: str) -> None:
        """A user message: steers the running turn, or starts a turn."""
        with self._lock:
            running = self._stream is not None
            if running:
                self._steer_locked(text)
        if not running:
            self.submit(lambda: self.turn(text))

    def queue_turn(self, text: str) -> None:
        """Run ``text`` as its own turn once the running one (if any) ended."""
        if self.turn_running:
            shown = terminal_safe(text)
            self.view.note(self.painter.style("34", f"  ⏸ queued: {shown}"))
        self.submit(lambda: self.turn(text))

    def cancel(self) -> bool:
        """Cancel the running turn; False when none runs."""
        with self._lock:
            stream = self._stream
        if stream is None:
            return False
        stream.cancel()
        self.view.note(self.painter.style("33", "  ⏹ cancelling…"))
        return True

    def submit(self, job: Job) -> None:
        """Run ``job`` on the worker after the jobs before it."""
        self._jobs.put(job)

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Block until every submitted job has finished (at most ``timeout`` seconds);
        True when they have."""
        done = self._jobs.all_tasks_done
        with done:
            return done.wait_for(lambda: not self._jobs.unfinished_tasks, timeout)

    def close(self) -> None:
        """Cancel the running turn, stop the worker, close the agent and its provider."""
        self._closing.set()  # jobs still queued are dropped
        self.cancel()
        self._jobs.put(None)
        self._worker.join(timeout=10)
        self._close_agent()

    # -- run on the worker -------------------------------------------------------------

    def turn(self, prompt: str | None) -> None:
        """Run one turn to its end (``prompt`` None: ``Agent.resume``), rendering it."""
        view = self.view
        view.begin()
        cancelled = False
        try:
            if self.before_turn is not None:
                self.before_turn(prompt)
            stream = (
                self.agent.run(prompt) if prompt is not None else self.agent.resume()
            )
            with self._lock:
                self._stream = stream
            with stream:
                while (ev := stream.next()) is not None:
                    if isinstance(ev, Steered):
                        with self._lock:
                            self._steers_applied += 1
                    view.handle(ev)
                    if isinstance(ev, TurnComplete):
                        cancelled = ev.stop_reason is StopReason.CANCELLED
                        self.totals.turns += 1
                        self.totals.usage = self.totals.usage + ev.usage
        except (NaviError, ValueError, RuntimeError) as exc:
            self.out(self.painter.style("31", error_line(exc)) + "\n")
            self.failed_turns += 1
            cancelled = True  # not answered on its own after a failure
        finally:
            with self._lock:
                self._stream = None
                unanswered = self._steers_sent > self._steers_applied
                self._steers_sent = self._steers_applied = 0
            view.end()
        if unanswered and not cancelled:
            # typed too late for the turn that ran: it waits in the session, answer it
            self.turn(None)
        elif unanswered:  # kept in the session, unanswered: say where it goes
            self.out(
                self.painter.style(
                    "35",
                    "  ↳ what you typed during the turn was not answered: it goes "
                    "with your next message, or /continue answers it now",
                )
                + "\n"
            )

    def awaits_answer(self) -> bool:
        """Whether ``turn(None)`` has something to answer: what was typed during a
        cancelled turn, a prompt or tool results a crash left, a held batch; not a
        session whose last message is an answer (finished or cancelled)."""
        if len(self.agent.steering):
            return True
        last = self.agent.session.last_dialogue_message()
        return last is not None and (last.role != "assistant" or bool(last.tool_uses))

    def switch(self, settings: ChatSettings, session: str | None) -> bool:
        """Replace the agent: another session (None: a new one) or other settings.

        The session is looked up before anything is closed; when the new agent cannot
        be opened the old one is reopened. False when nothing would change.

        Raises:
            SessionNotFound, AmbiguousSession: ``session`` names no single session.
        """
        current = self.agent.session_id
        if session is not None:
            info = (
                self.store.latest() if session == "latest" else self.store.get(session)
            )
            session = info.id if info is not None else None
        if session == current and settings == self.settings:
            return False
        self._close_agent()  # it holds the session's lock
        try:
            self.agent = self.factory(settings, session)
        except BaseException:
            self.agent = self.factory(self.settings, current)
            raise
        self.settings = settings
        self.view.price = settings.price
        return True

    # -- internals ---------------------------------------------------------------------

    def _steer_locked(self, text: str) -> None:
        try:
            disposition = self.agent.steer(text)
        except SteeringQueueFull as exc:
            self.out(self.painter.style("31", error_line(exc)) + "\n")
            return
        self._steers_sent += 1
        shown = terminal_safe(text)
        if disposition is SteerDisposition.QUEUED:
            label = f"  ↳ steer: {shown} (before the next response)"
        else:
            label = f"  ↳ steer: {shown} (the turn is ending; answered next)"
        self.view.note(self.painter.style("35", label))

    def _close_agent(self) -> None:
        agent = self.agent
        try:
            agent.close()
        finally:
            agent.provider.close()

    def _work(self) -> None:
        while (job := self._jobs.get()) is not None:
            try:
                if not self._closing.is_set():
                    job()
            except Exception as exc:
                self.out(self.painter.style("31", error_line(exc)) + "\n")
            finally:
                self._jobs.task_done()
        self._jobs.task_done()
