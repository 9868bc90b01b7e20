"""A pause for clients that keep sending wrong bearer tokens.

After ``free`` wrong tokens in a row from one client address, each further one makes
that address wait ``base`` seconds, doubling up to ``cap``; while it waits, every
request from it that needs a token is answered 429 with ``Retry-After`` before its
token is even looked at (so the answer says nothing about a guess). A right token
clears the count. An IPv6 client is counted by its /64 network, which one host
usually holds whole. Memory is bounded: at most ``max_clients`` addresses are kept,
the least recently failing dropped first, and an address is forgotten once it has
neither sent a wrong token nor waited for ``cap`` seconds. Each worker process keeps
its own counts.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["AuthThrottle", "client_address"]


def client_address(environ: Mapping[str, Any], trusted_proxies: Iterable[str]) -> str:
    """The address a request comes from: ``REMOTE_ADDR``, or the ``X-Real-IP`` that
    a trusted proxy (its address in ``trusted_proxies``) set."""
    peer = str(environ.get("REMOTE_ADDR") or "")
    forwarded = environ.get("HTTP_X_REAL_IP")
    if isinstance(forwarded, str) and forwarded.strip() and peer in trusted_proxies:
        return forwarded.strip()
    return peer


def _key(address: str) -> str:
    try:
        ip = ipaddress.ip_address(address)
    except ValueError:
        return address[:64]
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


@dataclass
class _Record:
    failures: int = 0
    last: float = 0.0  # monotonic time of the last wrong token
    until: float = 0.0  # monotonic time the wait ends


class AuthThrottle:
    """Counts wrong tokens per client address and says how long one must wait."""

    def __init__(
        self,
        *,
        free: int = 5,
        base: float = 1.0,
        cap: float = 300.0,
        max_clients: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free = free
        self.base = base
        self.cap = cap
        self.max_clients = max_clients
        self._clock = clock
        self._mutex = threading.Lock()
        self._records: OrderedDict[str, _Record] = OrderedDict()

    def wait(self, address: str) -> float:
        """Seconds ``address`` must still wait before its token is checked (0: none)."""
        key = _key(address)
        with self._mutex:
            record = self._records.get(key)
            if record is None:
                return 0.0
            now = self._clock()
            if now - max(record.last, record.until) >= self.cap:
                del self._records[key]  # quiet long enough: a fresh start
                return 0.0
            return max(0.0, record.until - now)

    def failed(self, address: str) -> float:
        """Count a wrong token from ``address``; the seconds it must now wait."""
        key = _key(address)
        with self._mutex:
            record = self._records.pop(key, None) or _Record()
            self._records[key] = record  # the most recent failure goes last
            while len(self._records) > self.max_clients:
                self._records.popitem(last=False)
            record.failures += 1
            record.last = now = self._clock()
            over = record.failures - self.free
            if over <= 0:
                return 0.0
            pause = min(self.cap, math.ldexp(self.base, min(over - 1, 60)))
            record.until = now + pause
            return pause

    def succeeded(self, address: str) -> None:
        """A right token from ``address``: its count starts again."""
        with self._mutex:
            self._records.pop(_key(address), None)

    def __len__(self) -> int:
        with self._mutex:
            return len(self._records)
