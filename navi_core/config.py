"""Configuration values: frozen, so a running turn reads one consistent snapshot."""

from __future__ import annotations

import random
import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ._ids import publish
from ._logs import get_logger
from .conversation import Usage
from .events import Cost

if TYPE_CHECKING:  # values sit below providers: the type only
    from .providers.base import Provider

__all__ = [
    "Budget",
    "CompactionConfig",
    "Config",
    "ImageLimits",
    "PlanningConfig",
    "Pricing",
    "RetryPolicy",
    "Timeout",
]


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Exponential backoff with full jitter for retryable provider errors.

    ``max_attempts`` counts opens, the first included. A provider's retry-after hint
    replaces the backoff but is capped by ``max_delay_ms`` like any other delay.
    """

    max_attempts: int = 4
    initial_delay_ms: int = 500
    multiplier: float = 2.0
    max_delay_ms: int = 30_000
    jitter: bool = True

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("RetryPolicy.max_attempts must be at least 1")
        if self.initial_delay_ms < 0 or self.max_delay_ms < 0:
            raise ValueError("RetryPolicy delays must not be negative")

    def delay_ms(
        self,
        attempt: int,
        retry_after_ms: int | None = None,
        rng: random.Random | None = None,
    ) -> int:
        """The wait before attempt ``attempt + 1``, where ``attempt`` (1-based) failed."""
        if retry_after_ms is not None:
            return max(0, min(retry_after_ms, self.max_delay_ms))
        ceiling = min(
            self.initial_delay_ms * self.multiplier ** (attempt - 1), self.max_delay_ms
        )
        if self.jitter:
            return int((rng or random).uniform(0, ceiling))
        return int(ceiling)


@dataclass(frozen=True, slots=True)
class CompactionConfig:
    """When and how to summarise an old prefix of the conversation.

    ``keep_verbatim`` is the token budget for the most recent turns kept word for word;
    ``prompt`` the system prompt of the summary request (None disables compaction);
    ``provider`` an optional cheaper provider for summaries; with ``context_window`` set,
    the loop compacts before a request estimated above ``threshold * context_window``.
    """

    keep_verbatim: int = 20_000
    prompt: str | None = None
    provider: Provider | None = None
    context_window: int | None = None
    threshold: float = 0.8


@dataclass(frozen=True, slots=True)
class Timeout:
    """HTTP timeouts in seconds (None waits forever).

    ``read`` bounds one socket read; ``idle``, when set, bounds instead how long a sent
    request may stay silent — waiting for the headers, or between two chunks of the
    response — separately from ``connect``.
    """

    connect: float | None = 10.0
    read: float | None = 120.0
    write: float | None = 30.0
    pool: float | None = 10.0
    idle: float | None = None


@dataclass(frozen=True, slots=True)
class ImageLimits:
    """What an image in a tool result may be before it is downscaled and re-encoded."""

    max_side: int = 1568
    max_bytes: int = 5 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class PlanningConfig:
    """Before the first response of a non-casual turn, one tool-less request writes a
    plan with this system prompt; the plan joins the conversation."""

    prompt: str


@dataclass(frozen=True, slots=True)
class Pricing:
    """USD per million tokens; the cache buckets cost ``input`` unless priced."""

    input: float
    output: float
    cache_read: float | None = None
    cache_write: float | None = None

    def cost_of(self, usage: Usage) -> Cost:
        """What ``usage`` costs."""
        read = self.input if self.cache_read is None else self.cache_read
        write = self.input if self.cache_write is None else self.cache_write
        input_usd = usage.input * self.input / 1_000_000
        output_usd = usage.output * self.output / 1_000_000
        cache_usd = (usage.cache_read * read + usage.cache_write * write) / 1_000_000
        return Cost(
            input_usd + output_usd + cache_usd, input_usd, output_usd, cache_usd
        )

    @property
    def prompt_rate(self) -> float:
        """The highest price of a prompt token, whichever bucket it lands in: what a
        budget check charges an estimated prompt, to stay on the safe side."""
        rates = (self.input, self.cache_read or 0.0, self.cache_write or 0.0)
        return max(rates)

    @classmethod
    def lookup(cls, model: str, base_url: str) -> Pricing | None:
        """The price of ``model`` at ``base_url`` in the ``genai-prices`` table, or
        None (package not installed, endpoint or model unknown). Never a network call.

        A price that depends on the prompt size (tiers) is taken at its base tier.
        Answers (a missing one too) are kept, so a turn's end looks it up once.
        """
        key = (cls, model, base_url)
        found = cls.known(model, base_url)
        if found is None:
            pending = _PENDING.get(key)
            if pending is not None:  # a prefetch is under way: its answer, not a second
                pending.wait()
            found = cls.known(model, base_url) or (
                _remember(key, cls._lookup(model, base_url)),
            )
        return found[0]

    @classmethod
    def known(cls, model: str, base_url: str) -> tuple[Pricing | None] | None:
        """The answer ``lookup`` would give, in a tuple, when it is at hand; None while
        it is not (never looked up, or a prefetch still under way): never waits."""
        try:
            return (_LOOKUPS[cls, model, base_url],)
        except KeyError:
            return None

    @classmethod
    def prefetch(cls, model: str, base_url: str) -> None:
        """Start ``lookup`` on a daemon thread unless its answer is known or on its way.

        The first lookup of a process imports the price table: a few hundred ms, part
        of it holding the GIL in one piece. A turn does it as it ends (a cancelled turn
        does not wait for it: its cost is None); a host that would rather pay it at a
        moment of its choosing (at start-up, while nothing streams) calls this then.
        """
        key = (cls, model, base_url)
        if key in _LOOKUPS:
            return
        if _on_this_machine(base_url) or not _table_installed():
            _remember(key, None)  # no table, or none that prices it: no thread
            return
        with _PENDING_LOCK:
            if key in _LOOKUPS or key in _PENDING:
                return
            done = _PENDING[key] = threading.Event()

        def run() -> None:
            try:
                _remember(key, cls._lookup(model, base_url))
            finally:
                with _PENDING_LOCK:
                    _PENDING.pop(key, None)
                done.set()

        try:
            threading.Thread(target=run, name="navi-prices", daemon=True).start()
        except BaseException:  # no thread (interpreter shutting down): lookups go on
            with _PENDING_LOCK:
                _PENDING.pop(key, None)
            done.set()
            raise

    @classmethod
    def _lookup(cls, model: str, base_url: str) -> Pricing | None:
        if _on_this_machine(base_url):  # the table prices no local server: no import
            return None
        try:
            from genai_prices import Usage as PriceUsage, calc_price
        except ImportError:
            return None
        try:
            found = calc_price(PriceUsage(), model, provider_api_url=base_url)
        except LookupError:
            return None
        except Exception as exc:  # a table that cannot be read: no price, no failure
            get_logger("navi_core.pricing").debug("price lookup failed: %r", exc)
            return None
        price = found.model_price
        inp = _rate(getattr(price, "input_mtok", None))
        out = _rate(getattr(price, "output_mtok", None))
        if inp is None or out is None:
            return None
        return cls(
            inp,
            out,
            _rate(getattr(price, "cache_read_mtok", None)),
            _rate(getattr(price, "cache_write_mtok", None)),
        )


_LOOKUPS: dict[tuple[type[Pricing], str, str], Pricing | None] = {}
_PENDING: dict[tuple[type[Pricing], str, str], threading.Event] = {}
_PENDING_LOCK = threading.Lock()


def _remember(
    key: tuple[type[Pricing], str, str], found: Pricing | None
) -> Pricing | None:
    """Keep a lookup's answer (at most 256: the table starts over when full)."""
    if len(_LOOKUPS) >= 256:
        _LOOKUPS.clear()
    _LOOKUPS[key] = found
    return found


def _table_installed() -> bool:
    import importlib.util

    return importlib.util.find_spec("genai_prices") is not None


def _on_this_machine(url: str) -> bool:
    """Whether ``url`` names a loopback host (a local model server)."""
    import ipaddress
    from urllib.parse import urlsplit

    try:
        host = urlsplit(url).hostname or ""
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _rate(value: Any) -> float | None:
    """A table price (a Decimal, or tiers with a ``base``) as a float."""
    if value is None:
        return None
    base = getattr(value, "base", value)
    try:
        return float(base)
    except (TypeError, ValueError):
        return None


@dataclass(frozen=True, slots=True)
class Budget:
    """What one turn may spend: ``usd`` (needs a known price) and ``tokens`` (prompt
    and output tokens of every response, cache buckets included); None: no limit.

    Before each request the turn adds the request's estimated prompt to what it spent;
    when that meets or passes a limit, the turn ends with ``StopReason.BUDGET`` and the
    request is not sent.
    """

    usd: float | None = None
    tokens: int | None = None

    def __post_init__(self) -> None:
        if self.usd is not None and self.usd < 0:
            raise ValueError("Budget.usd must not be negative")
        if self.tokens is not None and self.tokens < 0:
            raise ValueError("Budget.tokens must not be negative")


@dataclass(frozen=True, slots=True)
class Config:
    """Loop settings; ``Agent.set_config`` swaps the whole value at a response boundary."""

    retry: RetryPolicy = field(default_factory=RetryPolicy)
    max_iterations: int = 50
    compaction: CompactionConfig = field(default_factory=CompactionConfig)
    max_tool_threads: int = 8
    images: ImageLimits = field(default_factory=ImageLimits)
    max_output_tokens: int | None = None
    temperature: float | None = None
    #: seconds of wall clock for a whole turn (``StopReason.TIMEOUT``); None: no limit
    turn_timeout: float | None = None
    #: steering messages that may wait at once (``SteeringQueueFull`` beyond)
    max_steering: int = 64
    #: thinking characters a response may stream with no text or tool call
    max_thinking_chars: int | None = None
    #: a planning request before the first response of a non-casual turn
    planning: PlanningConfig | None = None
    #: adjacent deltas of one kind that arrived in one network read become one event
    coalesce_deltas: bool = False
    #: what one turn may spend (``StopReason.BUDGET``); None: no limit
    budget: Budget | None = None


publish(globals())
