"""Questions a running tool call asks the host through its stream, and their answers:
the call waits on ``expect(request_id)``; ``Stream.answer`` hands the answer over with
``deliver``. Request ids are unique, so one table serves every stream."""

from __future__ import annotations

import threading
from collections.abc import Mapping
from typing import Any

__all__ = ["Question", "deliver", "expect"]

_lock = threading.Lock()
_waiting: dict[str, Question] = {}


class Question:
    """One question waiting for its answer (a mapping, or None for no answer)."""

    __slots__ = ("answer", "answered", "request_id")

    def __init__(self, request_id: str) -> None:
        self.request_id = request_id
        self.answered = threading.Event()
        self.answer: dict[str, Any] | None = None

    def wait(
        self, cancelled: threading.Event, poll: float = 0.05
    ) -> dict[str, Any] | None:
        """The answer, or None once ``cancelled`` is set first; the question is then
        withdrawn."""
        try:
            while not self.answered.wait(poll):
                if cancelled.is_set():
                    return None
            return self.answer
        finally:
            with _lock:
                _waiting.pop(self.request_id, None)


def expect(request_id: str) -> Question:
    """Register a question before it is published, so no answer can come too early."""
    question = Question(request_id)
    with _lock:
        _waiting[request_id] = question
    return question


def deliver(request_id: str, answer: Mapping[str, Any] | None) -> bool:
    """Hand ``answer`` to the call waiting on ``request_id``; False when none waits."""
    with _lock:
        question = _waiting.pop(request_id, None)
    if question is None:
        return False
    question.answer = dict(answer) if answer is not None else None
    question.answered.set()
    return True
