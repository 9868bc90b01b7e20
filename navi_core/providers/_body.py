"""The loop that feeds an HTTP response body to a core parser, in slices.

One read from the socket can hold thousands of events (``_sockets.READ_BYTES``); the
parser is fed ``PARSE_BYTES`` of it at a time, so each batch of events handed to a
stream is small. Transport failures become navi_core errors (``_http_errors``).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

from .._logs import get_logger
from ._http_errors import RawBody, map_transport_errors

__all__ = ["PARSE_BYTES", "Parser", "RawBody", "Tap", "body_batches"]


class Parser(Protocol):
    """The core parser interface a provider streams through (``core.*Parser``)."""

    def feed(self, data: bytes) -> list[tuple[Any, ...]]: ...

    def close(self) -> list[tuple[Any, ...]]: ...


class Tap(Protocol):
    """Sees a response as it arrives: its status and headers, then its raw bytes."""

    def status(self, code: int, headers: Mapping[str, str]) -> None: ...

    def chunk(self, data: bytes) -> None: ...


#: bytes parsed per batch. Parsing a large read in slices keeps the events waiting in a
#: stream's queue few, so while many streams share the process (each waiting its turn
#: for the GIL) few of them outlive a young-generation collection and get promoted, and
#: the full collections that would walk them all stay rare. bench/bench_threads.py:
#: the cyclic GC's share fell from 0.45 to 0.17 µs per event with one stream, from 0.69
#: to 0.21 with 64, against parsing each 256 KiB read whole.
PARSE_BYTES = 16 * 1024


def body_batches(
    response: RawBody,
    parser: Parser,
    secrets: Sequence[str],
    tap: Tap | None = None,
) -> Iterator[list[tuple[Any, ...]]]:
    """The parser's output for ``response``'s body, a batch per slice, then the
    parser's close (``tap`` sees each read's raw bytes)."""
    feed = parser.feed
    step = PARSE_BYTES
    size = count = 0
    with map_transport_errors(secrets):
        for chunk in response.iter_raw():
            if tap is not None:
                tap.chunk(chunk)
            n = len(chunk)
            size += n
            count += 1
            if n <= step:
                yield feed(chunk)
                continue
            for i in range(0, n, step):
                yield feed(chunk[i : i + step])
    _log.debug("response body: %d bytes in %d chunks", size, count)
    yield parser.close()


_log = get_logger("navi_core.http")
