"""b64encode: exactly the stdlib's output for every size and buffer kind, on both twins."""

from __future__ import annotations

import array
import base64
import os
import threading
from types import ModuleType

import pytest
from hypothesis import HealthCheck, given, settings, strategies as st

FIXTURE_SAFE = settings(
    suppress_health_check=[HealthCheck.function_scoped_fixture], deadline=None
)


def stdlib(data: bytes) -> str:
    return base64.b64encode(data).decode()


@pytest.mark.parametrize("size", range(41))
def test_small_sizes_match_the_stdlib(core: ModuleType, size: int) -> None:
    data = bytes((7 * i + 250) % 256 for i in range(size))
    out = core.b64encode(data)
    assert type(out) is str
    assert out == stdlib(data)


def test_every_byte_value_in_every_position(core: ModuleType) -> None:
    data = bytes(range(256)) * 3 + bytes(range(255, -1, -1))
    for start in range(3):
        assert core.b64encode(data[start:]) == stdlib(data[start:])


@pytest.mark.parametrize("size", [65535, 65536, 65537, (1 << 20) + 1, (1 << 20) + 2])
def test_large_inputs_match_the_stdlib(core: ModuleType, size: int) -> None:
    data = os.urandom(size)
    assert core.b64encode(data) == stdlib(data)


def test_bytearray_and_memoryview_slices(core: ModuleType) -> None:
    raw = os.urandom(1000)
    assert core.b64encode(bytearray(raw)) == stdlib(raw)
    view = memoryview(raw)
    for a, b in [(0, 0), (1, 2), (3, 10), (17, 999), (500, 1000)]:
        assert core.b64encode(view[a:b]) == stdlib(raw[a:b])


def test_other_contiguous_buffers_are_read_as_their_bytes(core: ModuleType) -> None:
    numbers = array.array("i", range(100))
    assert core.b64encode(numbers) == stdlib(numbers.tobytes())
    assert core.b64encode(memoryview(numbers).cast("B")) == stdlib(numbers.tobytes())


def test_a_non_contiguous_view_is_copied(core: ModuleType) -> None:
    raw = os.urandom(301)
    stepped = memoryview(raw)[::3]
    assert not stepped.c_contiguous
    assert core.b64encode(stepped) == stdlib(raw[::3])


@pytest.mark.parametrize("bad", ["text", None, 12, [1, 2]])
def test_a_non_buffer_is_a_type_error(core: ModuleType, bad: object) -> None:
    with pytest.raises(TypeError, match=f"bytes-like object, not {type(bad).__name__}"):
        core.b64encode(bad)


def test_a_released_view_is_refused(core: ModuleType) -> None:
    view = memoryview(b"abc")
    view.release()
    with pytest.raises(ValueError, match="released"):
        core.b64encode(view)


def test_threads_encoding_at_once_each_get_their_own_result(core: ModuleType) -> None:
    inputs = [os.urandom((1 << 19) + i) for i in range(4)]
    results: dict[int, str] = {}

    def work(i: int) -> None:
        results[i] = core.b64encode(inputs[i])

    threads = [threading.Thread(target=work, args=(i,)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert [results[i] for i in range(4)] == [stdlib(d) for d in inputs]


@FIXTURE_SAFE
@given(data=st.binary(max_size=200))
def test_random_bytes_match_the_stdlib(core: ModuleType, data: bytes) -> None:
    assert core.b64encode(data) == stdlib(data)
