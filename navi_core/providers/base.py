"""The provider seam: what the Stream asks of a provider.

A provider turns a ``ProviderRequest`` into a ``ProviderStream``. ``produce(queue)``
advances the response by one unit of input (a network chunk, a scripted batch), pushes
the events it yields and returns True once the ``MessageComplete`` event is queued.
The shared implementation of a ``ProviderStream`` is ``delta_stream.DeltaStream``;
errors are mapped in ``errormap``.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from .._ids import publish
from ..conversation import Message, WireIdentity
from ..events import Event
from ..output import OutputSpec
from ..tools._tool import ToolSpec

__all__ = [
    "Provider",
    "ProviderRequest",
    "ProviderStream",
    "RequestConfig",
    "check_provider",
]


class RequestConfig(Protocol):
    """The settings a provider reads from the loop's configuration.

    ``navi_core.config.Config`` has them; a provider needs nothing else of it.
    """

    @property
    def max_output_tokens(self) -> int | None:
        """The most tokens the response may have (None: the provider's default)."""
        ...

    @property
    def temperature(self) -> float | None:
        """The sampling temperature (None: the provider's default)."""
        ...

    @property
    def coalesce_deltas(self) -> bool:
        """Whether adjacent deltas of one network read become one event (providers
        read it with a default of False: a config written before it still works)."""
        ...


@dataclass(frozen=True, slots=True)
class ProviderRequest:
    """Everything one response needs: the dialogue, system prompt, tools and config;
    ``output`` when the answer must be a structured value (``run(..., output=T)``)."""

    messages: Sequence[Message]  # a tuple, or a History view of the conversation
    system: str | None
    tools: tuple[ToolSpec, ...]
    config: RequestConfig
    output: OutputSpec | None = None


@runtime_checkable
class ProviderStream(Protocol):
    """One open response."""

    def produce(self, queue: deque[Event]) -> bool:
        """Push the events of the next unit of input; True once the message is complete.

        Raises:
            ProviderError: the response failed; nothing of it was committed.
        """
        ...

    def close(self) -> None:
        """Release the response (idempotent)."""
        ...


@runtime_checkable
class Provider(Protocol):
    """A model endpoint."""

    @property
    def wire(self) -> WireIdentity:
        """The API style, base URL and model this provider talks to."""
        ...

    def open(self, request: ProviderRequest) -> ProviderStream:
        """Send the request and return the open response.

        Raises:
            ProviderError: the request was refused or could not be sent.
        """
        ...

    def close(self) -> None:
        """Release connections (idempotent)."""
        ...


_EXPECTED = (
    "a provider: OpenAIChat(model, base_url), OpenAIResponses(model, base_url), "
    "Anthropic(model, base_url), Scripted(items), or an object with wire, open() and "
    "close()"
)


#: classes whose instances passed ``check_provider`` (an Agent per request checks again)
_PROVIDER_TYPES: set[type] = set()


def check_provider(value: object) -> Provider:
    """``value`` if it is a provider; else a ``TypeError`` that says what is expected.

    A model name, a provider class not yet created, or a vendor SDK client are the
    usual mistakes; each is named in the message.
    """
    kind = type(value)
    if kind in _PROVIDER_TYPES:
        return value  # type: ignore[return-value]
    if isinstance(value, Provider) and not isinstance(value, type):
        _PROVIDER_TYPES.add(kind)  # a Protocol check walks the protocol each time
        return value
    if isinstance(value, type):
        got = f"the class {value.__name__} itself; create one: {value.__name__}(...)"
    elif isinstance(value, str):
        got = f"the string {value!r}; a model name goes inside the provider"
    else:
        got = f"{type(value).__module__}.{type(value).__qualname__}"
    raise TypeError(f"provider must be {_EXPECTED}, not {got}")


publish(globals())
