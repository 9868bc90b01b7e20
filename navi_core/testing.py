"""Cassettes: record a provider's real responses once, replay them offline.

``Recorder(provider, path)`` is a provider that sends every request through an HTTP
provider (``OpenAIChat``, ``OpenAIResponses``, ``Anthropic``) and writes, per response,
what the agent asked (the conversation, system prompt, tools and limits), the JSON body
sent, and the raw response bytes with the status, to a JSON-lines cassette. Request
headers are never written and the base URL is kept in its public form; the request's
credentials (the key, credential headers, URL user info and secret query values, in
every spelling) are redacted from everything written, the bodies a server sent back
included, since a 401 or a streamed answer may echo them: whole, split across network
reads or across the deltas of a streamed answer, or cut off where the body stops (a
connection reset, a stream closed early, an error body read up to its limit), however
the reads fell.

``Replay(path)`` is a provider that answers the same requests from the cassette,
offline and deterministically, through the same code as a live response: the recorded
bytes go over an in-memory transport into a provider of the recorded API, so the status
mapping, the core parser and the assembler are the ones a live turn uses. A request
that differs from the recorded one (the prompt, the tools, an earlier answer...) fails
at once with ``CassetteMismatch`` naming the first difference; so does a request past
the end of the cassette.

    with Recorder(OpenAIResponses("gpt-5"), "turn.jsonl") as provider:   # once, live
        Agent(provider, tools=[add]).run("2 + 40?") ...
    agent = Agent(Replay("turn.jsonl"), tools=[add])                   # in tests
"""

from __future__ import annotations

import base64
import os
import re
from collections import deque
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import accumulate, pairwise
from pathlib import Path
from typing import Any, Final

import httpx
import orjson

from . import codec
from ._secrets import (
    MIN_SECRET_START,
    REDACTED,
    redact_json,
    secret_pattern,
    secret_start,
)
from .conversation import WireIdentity
from .errors import ProviderError
from .events import Event
from .providers._http import HTTPProvider
from .providers._http_errors import markup_type
from .providers.anthropic import Anthropic
from .providers.base import ProviderRequest, ProviderStream
from .providers.openai_chat import OpenAIChat
from .providers.openai_responses import OpenAIResponses

__all__ = ["CASSETTE_VERSION", "CassetteMismatch", "Recorder", "Replay"]

CASSETTE_VERSION: Final = 1
_APIS: Final[dict[str, Callable[..., HTTPProvider]]] = {
    OpenAIChat.api_style: OpenAIChat,
    OpenAIResponses.api_style: OpenAIResponses,
    Anthropic.api_style: Anthropic,
}


class CassetteMismatch(AssertionError):
    """A replayed request differs from the recorded one, or the cassette ran out."""


def asked(request: ProviderRequest) -> dict[str, Any]:
    """What the agent asked for, independent of the provider's own options."""
    config = request.config
    return {
        "system": request.system,
        "messages": [codec.to_obj(m) for m in request.messages],
        "tools": [
            {"name": t.name, "description": t.description, "parameters": t.parameters}
            for t in request.tools
        ],
        "max_output_tokens": config.max_output_tokens,
        "temperature": config.temperature,
    }


class _Take:
    """The ``Tap`` of one response: its status, headers and raw chunks."""

    __slots__ = ("chunks", "code", "headers", "pattern", "secrets")

    def __init__(
        self, secrets: Sequence[str], pattern: re.Pattern[bytes] | None
    ) -> None:
        self.code = 0
        self.headers: dict[str, str] = {}
        self.chunks: list[bytes] = []
        self.secrets = secrets
        self.pattern = pattern

    def status(self, code: int, headers: Mapping[str, str]) -> None:
        self.code = code
        self.headers = dict(headers)

    def chunk(self, data: bytes) -> None:
        self.chunks.append(bytes(data))

    def entry(self, request: dict[str, Any], body: Any, complete: bool) -> bytes:
        """The cassette line, every secret of the request redacted (``complete``:
        the response was read to its end)."""
        secrets, pattern = self.secrets, self.pattern
        ctype = self.headers.get("content-type", "")
        # an event stream (as ``HTTPProvider`` reads a 2xx body) the reads stopped in
        cut_short = (
            not complete
            and 200 <= self.code < 300
            and not ctype.startswith("application/json")
            and markup_type(ctype) is None
        )
        raw, sizes = _redacted_events(
            *_redacted(self.chunks, pattern, secrets),
            pattern,
            secrets,
            complete=not cut_short,
        )
        try:
            payload: dict[str, Any] = {"body_text": raw.decode("utf-8")}
        except UnicodeDecodeError:
            payload = {"body_b64": base64.b64encode(raw).decode()}
        line = {
            **_redacted_request(
                {"request": request, "sent": body, "status": self.code,
                 "headers": self.headers},
                self.secrets,
            ),
            **payload,
            "chunk_sizes": sizes,
            "complete": complete,
        }  # fmt: skip
        return orjson.dumps(line) + b"\n"


#: the start of a secret a finished answer stops in, redacted from 8 characters on
#: (4 in a response cut off), so an answer that only ends the way a key begins
#: ("task-a" and "sk-ant-...") keeps its words
_FINISHED_SECRET_START: Final = 2 * MIN_SECRET_START


def _redacted_request(value: Any, secrets: Sequence[str]) -> Any:
    """``value`` (what was asked and sent) with ``redact_json`` applied, and each
    string that ends with the start of a secret (an earlier answer ``max_tokens``
    cut off inside the key it echoed) ending with ``REDACTED`` instead, as the
    recording of that answer does: its replay sends the same."""
    return _ends_redacted(redact_json(value, secrets), secrets)


def _ends_redacted(value: Any, secrets: Sequence[str]) -> Any:
    if isinstance(value, str):
        data = value.encode("utf-8", "surrogatepass")
        stop = secret_start(data, secrets, shortest=_FINISHED_SECRET_START)
        if stop is None:
            return value
        return data[:stop].decode("utf-8", "surrogatepass") + REDACTED
    if isinstance(value, dict):
        return {k: _ends_redacted(v, secrets) for k, v in value.items()}
    if isinstance(value, list):
        return [_ends_redacted(v, secrets) for v in value]
    return value


def _redacted(
    chunks: Sequence[bytes],
    pattern: re.Pattern[bytes] | None,
    secrets: Sequence[str] = (),
) -> tuple[bytes, list[int]]:
    """The body with every secret replaced, and its chunk sizes moved to match.

    Redacting the joined body catches a secret split across two network reads; a
    chunk boundary that fell inside a secret moves to the end of its replacement.
    A body that stops inside a secret (a connection reset, a stream closed early,
    an error body cut at its size limit) ends with the start of it, which no
    pattern of the whole secret finds: that start is replaced too
    (``secret_start``).
    """
    raw = b"".join(chunks)
    sizes = [len(c) for c in chunks]
    spans = [m.span() for m in pattern.finditer(raw)] if pattern is not None else []
    cut = secret_start(raw, secrets, spans[-1][1] if spans else 0)
    if cut is not None:
        spans.append((cut, len(raw)))
    if not spans:
        return raw, sizes
    mark = REDACTED.encode()
    out, at = [], 0
    for start, end in spans:
        out += [raw[at:start], mark]
        at = end
    out.append(raw[at:])
    new_ends, i, shift = [], 0, 0
    for end in accumulate(sizes):
        while i < len(spans) and spans[i][1] <= end:
            shift += len(mark) - (spans[i][1] - spans[i][0])
            i += 1
        if i < len(spans) and spans[i][0] < end:
            new_ends.append(spans[i][0] + shift + len(mark))
        else:
            new_ends.append(end + shift)
    moved = [b - a for a, b in zip([0, *new_ends], new_ends, strict=False)]
    return b"".join(out), [size for size in moved if size]


#: what lies between two data lines of one event that follow one another
_DATA_GAP: Final = re.compile(rb"(?:\r\n|\r|\n)data: ?")


def _redacted_events(
    raw: bytes,
    sizes: Sequence[int],
    pattern: re.Pattern[bytes] | None,
    secrets: Sequence[str] = (),
    *,
    complete: bool = True,
) -> tuple[bytes, list[int]]:
    """``raw`` (an SSE body, its bytes redacted) with every secret the model streamed
    across events redacted too, and its chunk sizes moved to match.

    A model streams text in small deltas ("your ", "key i", "s sk-", "test-"...), so
    a key can lie in several events with no byte pattern seeing it whole. Each event
    whose ``data:`` lines hold JSON (anything else, ``[DONE]`` included, is left
    alone) is parsed and its strings grouped into streams by name: the last key of
    the string's JSON path (``content``, ``text``, ``arguments``, ``partial_json``,
    ...) with the ints naming the list elements on the way (a choice, a tool call:
    by its ``"index"`` when it has one, else by place). Text a response spreads over
    several content blocks, or starts in a block's opening event, so joins its
    deltas. Each stream's strings are joined in order and searched with ``pattern``;
    the piece where a secret starts gets ``REDACTED`` for its part of it, later
    pieces lose theirs; a stream that stops inside a secret (the body was cut off,
    or ``max_tokens`` cut the model off) has the start of it redacted the same way
    (``secret_start``: from 4 characters on, 8 in a response read to its end). Only the changed events are written anew (orjson, one
    ``data:`` line), every other byte is kept; a chunk boundary inside a changed
    event moves to that event's end.

    An event stream that was not read to its end (not ``complete``: the connection
    broke, or the stream was closed early) may stop inside an event, in the middle
    of a piece of a secret whose start the events before it hold. That unfinished
    event (one with a ``data:`` line and no blank line after it) is left out, unless
    its data is already whole JSON: no reader had taken it as an event, and its part
    of the secret is no secret's start.
    """
    if pattern is None or b"data:" not in raw:
        return raw, list(sizes)
    # the events: (start, end with its blank line, its data's start and end, JSON)
    events: list[tuple[int, int, int, int, Any]] = []
    start: int | None = None
    data: list[tuple[int, int]] = []
    unfinished: int | None = None  # where an event the body stops inside starts
    at = 0
    for line in [*raw.splitlines(keepends=True), b""]:  # b"": the end of the body
        text = line.rstrip(b"\r\n")
        if start is not None and data and not line and not complete:
            unfinished = start  # no blank line ends it (taken back if it is JSON)
        if start is not None and not text:
            # the data lines joined, as a reader joins them (only when they follow
            # one another: the event is written anew as one line in their place)
            if data and all(
                _DATA_GAP.fullmatch(raw, a_end, b_start)
                for (_, a_end), (b_start, _) in pairwise(data)
            ):
                joined = b"\n".join(raw[a:b] for a, b in data)
                try:
                    value = orjson.loads(joined)
                except orjson.JSONDecodeError:
                    value = None
                if isinstance(value, dict | list):
                    events.append(
                        (start, at + len(line), data[0][0], data[-1][1], value)
                    )
                    unfinished = None
            start, data = None, []
        elif text:
            start = at if start is None else start
            if text.startswith(b"data:"):
                skip = 6 if text.startswith(b"data: ") else 5
                data.append((at + skip, at + len(text)))
        at += len(line)

    # the start of a secret a stream stops in (``_FINISHED_SECRET_START``)
    shortest = _FINISHED_SECRET_START if complete else MIN_SECRET_START
    # the strings of each stream: (its event, the dict or list holding it, the key)
    streams: dict[tuple[Any, ...], list[tuple[int, Any, Any, str]]] = {}
    for n, (*_, value) in enumerate(events):
        stack: list[tuple[tuple[Any, ...], Any]] = [((), value)]
        while stack:  # depth first, in document order
            path, node = stack.pop()
            if isinstance(node, dict):
                items = [(k, k, v) for k, v in node.items()]
            else:  # a choice or a tool call by its "index", anything else by place
                items = [(i, _list_name(v, i), v) for i, v in enumerate(node)]
            inner = []
            for key, name, item in items:
                if isinstance(item, str):
                    where = (*(p for p in path if type(p) is int), name)
                    streams.setdefault(where, []).append((n, node, key, item))
                elif isinstance(item, dict | list):
                    inner.append(((*path, name), item))
            stack += reversed(inner)
    # each stream joined and searched; the pieces a secret overlaps rewritten
    mark = REDACTED.encode()
    changed: set[int] = set()
    for pieces in streams.values():
        parts = [piece.encode() for *_, piece in pieces]
        joined = b"".join(parts)
        spans = [m.span() for m in pattern.finditer(joined)]
        stop = secret_start(
            joined, secrets, spans[-1][1] if spans else 0, shortest=shortest
        )
        if stop is not None:
            spans.append((stop, len(joined)))
        first, begin = 0, 0  # the first span not ended before this piece; its start
        for (n, holder, key, _), part in zip(pieces, parts, strict=True):
            end = begin + len(part)
            while first < len(spans) and spans[first][1] <= begin:
                first += 1
            kept, cut, i = [], begin, first
            while part and i < len(spans) and spans[i][0] < end:
                kept.append(joined[cut : max(spans[i][0], begin)])
                kept += [mark] if spans[i][0] >= begin else []
                cut = min(spans[i][1], end)
                i += 1
            if kept:
                holder[key] = b"".join([*kept, joined[cut:end]]).decode()
                changed.add(n)
            begin = end
    # each edit: the event's span, the bytes replaced in it, what replaces them
    edits: list[tuple[int, int, int, int, bytes]] = []
    for n in sorted(changed):
        start, end, data_start, data_end, value = events[n]
        edits.append((start, end, data_start, data_end, orjson.dumps(value)))
    if unfinished is not None:
        edits.append((unfinished, len(raw), unfinished, len(raw), b""))
    if not edits:
        return raw, list(sizes)

    # the changed events written anew, the chunk boundaries moved as in ``_redacted``
    out, at = [], 0
    moves: list[tuple[int, int, int]] = []  # a changed event's span, its growth
    for start, end, cut_from, cut_to, new in edits:
        out += [raw[at:cut_from], new]
        at = cut_to
        moves.append((start, end, len(new) - (cut_to - cut_from)))
    out.append(raw[at:])
    new_ends, i, shift = [], 0, 0
    for end in accumulate(sizes):
        while i < len(moves) and moves[i][1] <= end:
            shift += moves[i][2]
            i += 1
        if i < len(moves) and moves[i][0] < end:  # inside event i: to its end
            new_ends.append(moves[i][1] + shift + moves[i][2])
        else:
            new_ends.append(end + shift)
    moved = [b - a for a, b in zip([0, *new_ends], new_ends, strict=False)]
    return b"".join(out), [size for size in moved if size]


def _list_name(item: Any, place: int) -> int:
    """A list element's name in a stream's path: its int ``"index"`` if it has one."""
    index = item.get("index") if isinstance(item, dict) else None
    return index if type(index) is int else place


class _Recording:
    """The provider's stream; the response is written to the cassette when closed."""

    __slots__ = ("_done", "_stream", "_write")

    def __init__(self, stream: ProviderStream, write: Any) -> None:
        self._stream = stream
        self._write = write
        self._done = False

    def produce(self, queue: deque[Event]) -> bool:
        self._done = self._stream.produce(queue)
        return self._done

    def close(self) -> None:
        self._stream.close()
        write, self._write = self._write, None
        if write is not None:
            write(self._done)


class Recorder:
    """A provider that passes every request to ``provider`` and records it to ``path``.

    The cassette is started afresh; each response is appended when its stream closes
    (or when the request fails with an error status), so a crash keeps what finished.
    """

    def __init__(self, provider: HTTPProvider, path: str | os.PathLike[str]) -> None:
        if not isinstance(provider, HTTPProvider) or provider.api_style not in _APIS:
            raise TypeError(
                "Recorder records an HTTP provider (OpenAIChat, OpenAIResponses, "
                f"Anthropic), not {type(provider).__name__}"
            )
        self.provider = provider
        self.path = Path(path)
        self._secrets = provider.secrets
        self._pattern = secret_pattern(self._secrets)
        wire = provider.wire
        head = {"navi_cassette": CASSETTE_VERSION, "api_style": wire.api_style,
                "base_url": wire.base_url, "model": wire.model}  # fmt: skip
        self.path.write_bytes(orjson.dumps(redact_json(head, self._secrets)) + b"\n")

    @property
    def wire(self) -> WireIdentity:
        """The recorded provider's identity."""
        return self.provider.wire

    def open(self, request: ProviderRequest) -> ProviderStream:
        """Open the response on the real provider, recording it.

        Raises:
            ProviderError: what the provider raised (recorded first when the server
                answered).
        """
        take = _Take(self._secrets, self._pattern)
        what, body = asked(request), self.provider.build_body(request)

        def write(complete: bool) -> None:
            with self.path.open("ab") as f:
                f.write(take.entry(what, body, complete))

        try:
            stream = self.provider.open(request, tap=take)
        except ProviderError:
            if take.code:
                write(False)
            raise
        return _Recording(stream, write)

    def close(self) -> None:
        """Close the recorded provider."""
        self.provider.close()

    def __enter__(self) -> Recorder:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class Replay:
    """A provider answering from the cassette at ``path``, in order, offline.

    Raises (from ``open``):
        CassetteMismatch: the request differs from the recorded one, or there is none.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        lines = self.path.read_bytes().splitlines()
        if not lines:
            raise ValueError(f"{self.path}: empty, not a cassette")
        head = orjson.loads(lines[0])
        if not isinstance(head, dict) or head.get("navi_cassette") != CASSETTE_VERSION:
            raise ValueError(f"{self.path}: not a version {CASSETTE_VERSION} cassette")
        self._entries = [orjson.loads(line) for line in lines[1:] if line.strip()]
        self._next = 0
        self._current: dict[str, Any] | None = None
        api = _APIS.get(head["api_style"])
        if api is None:
            raise ValueError(f"{self.path}: unknown API style {head['api_style']!r}")
        client = httpx.Client(transport=httpx.MockTransport(self._respond))
        self._provider = api(head["model"], head["base_url"], client=client)
        self._client = client

    @property
    def wire(self) -> WireIdentity:
        """The recorded provider's identity (API style, public base URL, model)."""
        return self._provider.wire

    @property
    def remaining(self) -> int:
        """Recorded responses not replayed yet."""
        return len(self._entries) - self._next

    def open(self, request: ProviderRequest) -> ProviderStream:
        """The next recorded response, if ``request`` is the one recorded for it."""
        number = self._next + 1
        if self._next >= len(self._entries):
            raise CassetteMismatch(
                f"{self.path.name}: request {number} was not recorded "
                f"(the cassette holds {len(self._entries)})"
            )
        entry = self._entries[self._next]
        where = _first_difference(entry["request"], asked(request))
        if where is not None:
            path, recorded, sent = where
            # where the recording was redacted, what was sent may hold the secret
            shown = "(not shown: the recording is redacted there)"
            if not (isinstance(recorded, str) and REDACTED in recorded):
                shown = _short(sent)
            raise CassetteMismatch(
                f"{self.path.name}: request {number} differs from the recording at "
                f"{path or 'the top'}: recorded {_short(recorded)}, sent {shown}"
            )
        self._next += 1
        self._current = entry
        return self._provider.open(request)

    def _respond(self, request: httpx.Request) -> httpx.Response:
        entry = self._current
        assert entry is not None, "a request outside Replay.open"
        self._current = None
        if "body_b64" in entry:
            raw = base64.b64decode(entry["body_b64"])
        else:
            raw = entry["body_text"].encode("utf-8")
        return httpx.Response(
            entry["status"], headers=entry["headers"], content=_chunks(raw, entry)
        )

    def close(self) -> None:
        """Release the in-memory client (idempotent)."""
        self._client.close()

    def __enter__(self) -> Replay:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _chunks(raw: bytes, entry: dict[str, Any]) -> Iterator[bytes]:
    """The body cut where the network cut it when it was recorded."""
    at = 0
    for size in entry.get("chunk_sizes") or [len(raw)]:
        yield raw[at : at + size]
        at += size


def _first_difference(
    recorded: Any, sent: Any, path: str = ""
) -> tuple[str, Any, Any] | None:
    if type(recorded) is not type(sent):
        return path, recorded, sent
    if isinstance(recorded, dict):
        for key in [*recorded, *(k for k in sent if k not in recorded)]:
            if key not in recorded or key not in sent:
                return f"{path}.{key}".lstrip("."), recorded.get(key), sent.get(key)
            found = _first_difference(recorded[key], sent[key], f"{path}.{key}")
            if found is not None:
                return found[0].lstrip("."), found[1], found[2]
        return None
    if isinstance(recorded, list):
        for i, (a, b) in enumerate(zip(recorded, sent, strict=False)):
            found = _first_difference(a, b, f"{path}[{i}]")
            if found is not None:
                return found
        if len(recorded) != len(sent):
            return f"{path} (length)", len(recorded), len(sent)
        return None
    if recorded == sent or _redacted_match(recorded, sent):
        return None
    return path, recorded, sent


def _redacted_match(recorded: Any, sent: Any) -> bool:
    """Whether ``sent`` is ``recorded`` with a secret (one run of non-space text,
    as keys are) where the recording says ``[REDACTED]``: a key inside the prompt
    was redacted when it was recorded."""
    if not (isinstance(recorded, str) and isinstance(sent, str)):
        return False
    if REDACTED not in recorded:
        return False
    parts = map(re.escape, recorded.split(REDACTED))
    return re.fullmatch(r"\S+?".join(parts), sent) is not None


def _short(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."
