"""``Dechunker``: HTTP/1.1 chunked transfer coding removed, on both cores, at every cut.

Each rule is checked on the pure twin and the compiled core (the ``core`` fixture),
and hypothesis compares the two on random bodies, random chunkings and random
corruptions, fed at random boundaries: the same bytes, the same end, the same error.
"""

from __future__ import annotations

from collections.abc import Sequence
from types import ModuleType

import pytest
from chunking import chunkings
from hypothesis import given, settings, strategies as st

MAX_LINE = 4096


def encode(
    body: bytes, sizes: Sequence[int], *, ext: bytes = b"", trailers: bytes = b""
) -> bytes:
    """``body`` in chunks of ``sizes`` (the rest in one), then the last chunk."""
    out, i = [], 0
    for size in [*sizes, len(body)]:
        piece = body[i : i + max(1, size)]
        if not piece:
            break
        out.append(b"%x%s\r\n%s\r\n" % (len(piece), ext, piece))
        i += len(piece)
    return b"".join(out) + b"0\r\n" + trailers + b"\r\n"


def run(core: ModuleType, pieces: Sequence[bytes]) -> tuple[object, ...]:
    """What feeding ``pieces`` gives: the body, done, overrun, or the error raised."""
    dechunker = core.Dechunker()
    out = []
    try:
        for piece in pieces:
            out.append(dechunker.feed(piece))
    except ValueError as exc:
        return ("error", str(exc), b"".join(out))
    return (b"".join(out), dechunker.done, dechunker.overrun)


BODY = b'data: {"choices":[{"delta":{"content":"hi"}}]}\n\n' * 3


@pytest.mark.parametrize(
    "raw",
    [
        encode(BODY, [1, 2, 50, 7]),
        encode(BODY, [10], ext=b";name=value; other"),
        encode(BODY, [5], trailers=b"x-checksum: abc\r\nx-more: 1\r\n"),
        encode(BODY, []).replace(b"%x\r\n" % len(BODY), b"%X \t\r\n" % len(BODY)),
    ],
)
def test_the_body_comes_out_whole_at_every_cut(core: ModuleType, raw: bytes) -> None:
    for pieces in chunkings(raw):
        assert run(core, pieces) == (BODY, True, False)


def test_bytes_after_the_end_are_an_overrun(core: ModuleType) -> None:
    raw = encode(BODY, [9]) + b"HTTP/1.1 200 OK\r\n"
    for pieces in chunkings(raw):
        assert run(core, pieces) == (BODY, True, True)


def test_an_unfinished_body_is_not_done(core: ModuleType) -> None:
    raw = encode(BODY, [9])
    for cut in range(len(raw)):
        body, done, _ = run(core, [raw[:cut]])
        assert isinstance(body, bytes) and not done and BODY.startswith(body)


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b"zz\r\nab\r\n0\r\n\r\n", "bad chunk size line b'zz'"),
        (b"\r\nab\r\n0\r\n\r\n", "bad chunk size line b''"),
        (b"0x2\r\nab\r\n0\r\n\r\n", "bad chunk size line b'0x2'"),
        (b"+2\r\nab\r\n0\r\n\r\n", "bad chunk size line b'+2'"),
        (b"1" * 16 + b"\r\n", "bad chunk size line b'" + "1" * 16 + "'"),
        (b"2\r\nabXX0\r\n\r\n", "chunk data not followed by CRLF"),
        (b"2\r\nab\rX", "chunk data not followed by CRLF"),
        (b"1" * (MAX_LINE + 2), "chunk line too long"),
        (b"1;" + b"e" * MAX_LINE + b"\r\n", "chunk line too long"),
        (b"0\r\n" + b"t" * (MAX_LINE + 1) + b"\r\n\r\n", "chunk line too long"),
    ],
)
def test_a_broken_coding_raises_the_same_error_at_every_cut(
    core: ModuleType, raw: bytes, message: str
) -> None:
    for pieces in chunkings(raw, seeds=2):
        outcome = run(core, pieces)
        assert outcome[:2] == ("error", message)


def test_a_failed_dechunker_refuses_more(core: ModuleType) -> None:
    dechunker = core.Dechunker()
    with pytest.raises(ValueError, match="bad chunk size"):
        dechunker.feed(b"zz\r\n")
    with pytest.raises(ValueError, match="failed already"):
        dechunker.feed(b"0\r\n\r\n")


def test_any_bytes_like_input_is_taken(core: ModuleType) -> None:
    raw = encode(BODY, [4])
    dechunker = core.Dechunker()
    out = dechunker.feed(bytearray(raw[:20])) + dechunker.feed(memoryview(raw)[20:])
    assert out == BODY and dechunker.done


CORRUPTIONS = st.sampled_from(
    [b"", b"\r", b"\n", b"\r\n", b"0", b"f", b"g", b";", b" ", b"\t", b"\x00"]
)


@st.composite
def coded(draw: st.DrawFn) -> bytes:
    """A chunked body, sometimes corrupted at one place."""
    body = draw(st.binary(max_size=300))
    sizes = draw(st.lists(st.integers(1, 40), max_size=12))
    ext = draw(st.sampled_from([b"", b";a=b", b" ; x"]))
    trailers = draw(st.sampled_from([b"", b"t: 1\r\n"]))
    raw = encode(body, sizes, ext=ext, trailers=trailers)
    if draw(st.booleans()):
        at = draw(st.integers(0, len(raw)))
        raw = raw[:at] + draw(CORRUPTIONS) + raw[at + draw(st.integers(0, 2)) :]
    return raw + draw(st.sampled_from([b"", b"extra"]))


@settings(deadline=None, max_examples=600)
@given(raw=coded(), cuts=st.lists(st.integers(0, 400), max_size=12))
def test_the_compiled_core_agrees_with_its_twin(
    both_cores: tuple[ModuleType, ModuleType], raw: bytes, cuts: list[int]
) -> None:
    points = sorted({c for c in cuts if 0 < c < len(raw)})
    pieces = [raw[a:b] for a, b in zip([0, *points], [*points, len(raw)], strict=True)]
    py, cy = both_cores
    expected = run(py, pieces)
    assert run(cy, pieces) == expected
    # and the cuts change nothing on either core
    assert run(py, [raw]) == run(py, pieces) or expected[0] == "error"
