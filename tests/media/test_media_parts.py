"""media.to_part, media.is_media and Media: what a tool's image return value becomes."""

from __future__ import annotations

import array
import base64
import io
import random
import threading
import warnings

import pytest
from imagekit import decoded, encode, flat, photo, with_hole
from PIL import Image, ImageFile

from navi_core import media
from navi_core.config import ImageLimits
from navi_core.conversation import MediaPart, TextPart


def test_bytes_become_a_media_part_with_the_fitted_image() -> None:
    data = encode(photo(2000, 1500), "PNG", compress_level=1)
    part = media.to_part(data)
    assert isinstance(part, MediaPart)
    assert part.media_type == "image/jpeg"
    raw = base64.b64decode(part.data, validate=True)
    assert raw == media.fit(data)[0]
    assert decoded(raw).size == (1568, 1176)


def test_small_image_is_sent_as_it_came() -> None:
    data = encode(photo(200, 100), "GIF")
    part = media.to_part(bytearray(data))
    assert part == MediaPart("image/gif", base64.b64encode(data).decode())


def test_media_hint_is_corrected_by_the_bytes() -> None:
    data = encode(photo(64, 64), "WEBP")
    part = media.to_part(media.Media(data, "image/png"))
    assert isinstance(part, MediaPart)
    assert part.media_type == "image/webp"


def test_limits_are_honoured() -> None:
    part = media.to_part(encode(photo(900, 600), "PNG"), ImageLimits(max_side=300))
    assert isinstance(part, MediaPart)
    assert decoded(base64.b64decode(part.data)).size == (300, 200)


@pytest.mark.parametrize(
    ("value", "reason"),
    [
        (
            random.Random(5).randbytes(34),
            "not a PNG, JPEG, GIF or WebP image (34 bytes)",
        ),
        (b"\x89PNG\r\n\x1a\n" + bytes(40), "corrupt or truncated PNG image (48 bytes)"),
        (
            encode(photo(300, 200), "JPEG")[:900],
            "corrupt or truncated JPEG image (900 bytes)",
        ),
    ],
)
def test_bad_media_becomes_a_short_note(value: bytes, reason: str) -> None:
    part = media.to_part(value)
    assert isinstance(part, TextPart)
    assert part.text.startswith(f"[image dropped: {reason}")
    assert part.text.endswith("]")
    assert len(part.text) < 160


def test_bomb_becomes_a_note(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 10_000)
    part = media.to_part(encode(flat(150, 100), "PNG"))
    assert part == TextPart(
        "[image dropped: PNG image of 150x100 pixels is over the "
        "10000-pixel decompression-bomb limit]"
    )


def test_pillow_images_are_encoded() -> None:
    small = media.to_part(photo(200, 150))
    large = media.to_part(photo(2400, 1800))
    clear = media.to_part(with_hole(photo(300, 300)))
    palette = media.to_part(flat(1000, 800).convert("P"))
    assert isinstance(small, MediaPart) and small.media_type == "image/png"
    assert isinstance(large, MediaPart) and large.media_type == "image/jpeg"
    assert isinstance(clear, MediaPart) and clear.media_type == "image/png"
    assert isinstance(palette, MediaPart) and palette.media_type == "image/png"
    assert decoded(base64.b64decode(large.data)).size == (1568, 1176)
    assert decoded(base64.b64decode(small.data)).tobytes() == photo(200, 150).tobytes()


def test_a_pillow_image_is_not_changed() -> None:
    lazy = Image.open(io.BytesIO(encode(photo(3000, 2000), "JPEG")))
    part = media.to_part(lazy)
    assert isinstance(part, MediaPart) and part.media_type == "image/jpeg"
    assert lazy.size == (3000, 2000)  # no draft applied to the caller's object
    assert lazy.mode == "RGB"


def test_broken_lazy_pillow_image_becomes_a_note() -> None:
    data = encode(photo(300, 200), "PNG")
    lazy = Image.open(io.BytesIO(data[: len(data) // 2]))
    part = media.to_part(lazy)
    assert isinstance(part, TextPart)
    assert part.text.startswith(
        "[image dropped: corrupt or truncated RGB image of 300x200"
    )


def test_is_media() -> None:
    value: object
    for value in (
        b"x",
        bytearray(b"x"),
        memoryview(b"x"),
        media.Media(b"x"),
        flat(2, 2),
    ):
        assert media.is_media(value)
    for value in ("text", None, 3, {"a": 1}, [b"x"], TextPart("t")):
        assert not media.is_media(value)


def test_non_media_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="not an image: str"):
        media.to_part("a path, not an image")


def test_media_value() -> None:
    # a bytearray on purpose: Media stores bytes
    m = media.Media(bytearray(b"\x89PNG" + bytes(5000)), "image/png")  # type: ignore[arg-type]
    assert type(m.data) is bytes
    assert repr(m) == "Media(media_type='image/png', data=<5004 bytes>)"
    assert m == media.Media(b"\x89PNG" + bytes(5000), "image/png")
    with pytest.raises(TypeError, match="Media data must be bytes, not str"):
        media.Media("not bytes")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="not int"):
        media.Media(5)  # type: ignore[arg-type]


def test_memoryview_of_any_format_is_read_byte_for_byte() -> None:
    data = encode(photo(40, 40), "PNG")
    padded = data + bytes(-len(data) % 4)
    view = memoryview(array.array("I", padded))
    out, media_type = media.fit(view)
    assert media_type == "image/png"
    assert out == padded


@pytest.mark.parametrize("error", [MemoryError, KeyboardInterrupt])
def test_memory_error_and_interrupts_are_not_swallowed(
    monkeypatch: pytest.MonkeyPatch, error: type[BaseException]
) -> None:
    def boom(self: ImageFile.ImageFile) -> None:
        raise error

    monkeypatch.setattr(ImageFile.ImageFile, "load", boom)
    with pytest.raises(error):
        media.to_part(encode(photo(100, 100), "PNG"))


def test_threads_share_no_warning_state(monkeypatch: pytest.MonkeyPatch) -> None:
    """Tools run on threads: bombs refused there must not touch warnings.filters."""
    before = list(warnings.filters)
    bomb = encode(flat(3000, 3000), "PNG")
    good = encode(photo(300, 200), "JPEG")
    results: list[object] = []

    def work() -> None:
        results.append(media.to_part(bomb))
        results.append(media.to_part(good))

    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 5_000_000)
    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert warnings.filters == before
    notes = [r for r in results if isinstance(r, TextPart)]
    images = [r for r in results if isinstance(r, MediaPart)]
    assert len(notes) == 4 and all("decompression-bomb" in n.text for n in notes)
    assert len(images) == 4
