"""Planning: one tool-less request that writes a plan before a turn's first response.

With ``Config.planning = PlanningConfig(prompt)``, a turn started by ``run()`` with a
message that is not casual (``is_casual_message``) first sends the conversation with
the planning prompt added to the system prompt and no tools. The answer is committed
as an assistant message (the plan joins the conversation, and the stream returns its
``MessageComplete``); its usage counts in the turn's usage. A failed planning request
is skipped: the turn goes on without a plan.
"""

from __future__ import annotations

from collections import deque

from ..config import Config
from ..conversation import Message, Usage
from ..errors import ProviderError
from ..events import Event, MessageComplete
from ..providers.base import Provider, ProviderRequest
from ..session import Session
from .casual import is_casual_message
from .offload import Op

__all__ = ["PlanStep", "plan_step"]


class PlanStep:
    """The planning request of one turn; ``run`` on any thread, ``done`` on the driver."""

    __slots__ = ("config", "provider", "session", "usage")

    def __init__(self, session: Session, provider: Provider, config: Config) -> None:
        self.session = session
        self.provider = provider
        self.config = config
        #: the usage of the plan once it was committed
        self.usage = Usage()

    def request(self) -> ProviderRequest:
        """The conversation so far, the planning prompt added, no tools."""
        planning = self.config.planning
        assert planning is not None
        conversation = self.session.conversation
        system = conversation.system_prompt()
        prompt = planning.prompt if not system else f"{system}\n\n{planning.prompt}"
        return ProviderRequest(conversation.history(), prompt, (), self.config)

    def run(self) -> Message:
        """Send the planning request and return the plan message."""
        response = self.provider.open(self.request())
        queue: deque[Event] = deque()
        try:
            while not response.produce(queue):
                queue.clear()
        finally:
            response.close()
        complete = queue[-1]
        assert isinstance(complete, MessageComplete)
        return complete.message

    def done(self, op: Op[Message]) -> list[MessageComplete]:
        """Commit the plan of a finished ``run``; no events when it failed or is empty."""
        try:
            message = op.result()
        except ProviderError:
            return []
        if not message.text.strip():
            return []
        message = self.session.commit(message, self.provider.wire)
        self.usage = message.usage or Usage()
        return [MessageComplete(message, self.usage)]


def plan_step(
    session: Session, provider: Provider, config: Config, prompt: Message | None
) -> PlanStep | None:
    """The planning step for a turn started with ``prompt``, or None (no planning
    configured, a resumed turn, or a casual message)."""
    if config.planning is None or prompt is None or is_casual_message(prompt.text):
        return None
    return PlanStep(session, provider, config)
