"""media.sniff and media.fit: detection, pass-through, downscaling, format choice."""

from __future__ import annotations

import struct
import zlib

import pytest
from imagekit import decoded, encode, flat, photo, with_hole
from PIL import Image, ImageOps

from navi_core import media
from navi_core.config import ImageLimits

LIMITS = ImageLimits()


@pytest.fixture(scope="module")
def big_photo() -> Image.Image:
    return photo(4000, 3000)


def b64_len(n: int) -> int:
    return (n + 2) // 3 * 4


@pytest.mark.parametrize(
    ("fmt", "media_type"),
    [
        ("PNG", "image/png"),
        ("JPEG", "image/jpeg"),
        ("GIF", "image/gif"),
        ("WEBP", "image/webp"),
        ("BMP", "image/bmp"),
        ("TIFF", "image/tiff"),
    ],
)
def test_sniff_detects_each_format_without_a_hint(fmt: str, media_type: str) -> None:
    data = encode(photo(64, 48), fmt)
    assert media.sniff(data) == media_type
    assert media.sniff(memoryview(data)) == media_type
    assert media.sniff(bytearray(data)) == media_type


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x89PN",
        b"hello, world",
        b"BM" + bytes(30),
        b"RIFF\0\0\0\0WAVEfmt ",
        b"%PDF-1.7",
    ],
)
def test_sniff_rejects_what_is_not_an_image(data: bytes) -> None:
    assert media.sniff(data) is None


@pytest.mark.parametrize("fmt", ["PNG", "JPEG", "GIF", "WEBP"])
def test_small_accepted_image_passes_through_byte_identical(fmt: str) -> None:
    data = encode(photo(300, 200), fmt)
    out, media_type = media.fit(data, None, LIMITS)
    assert out == data
    assert media_type == media.sniff(data)


def test_pass_through_corrects_a_wrong_label() -> None:
    data = encode(photo(30, 20), "JPEG")
    assert media.fit(data, "image/png", LIMITS) == (data, "image/jpeg")


@pytest.mark.parametrize("fmt", ["BMP", "TIFF"])
def test_bmp_and_tiff_become_png(fmt: str) -> None:
    source = photo(120, 80)
    out, media_type = media.fit(encode(source, fmt), None, LIMITS)
    assert media_type == "image/png"
    assert decoded(out).tobytes() == source.tobytes()  # lossless conversion


@pytest.mark.parametrize(
    ("fmt", "options", "media_type"),
    [
        ("PNG", {"compress_level": 1}, "image/jpeg"),
        ("JPEG", {"quality": 92}, "image/jpeg"),
    ],
)
def test_large_photo_comes_out_within_limits(
    big_photo: Image.Image, fmt: str, options: dict[str, int], media_type: str
) -> None:
    data = encode(big_photo, fmt, **options)
    out, got_type = media.fit(data, None, LIMITS)
    assert got_type == media_type
    assert media.sniff(out) == media_type
    assert b64_len(len(out)) <= LIMITS.max_bytes
    assert decoded(out).size == (1568, 1176)


@pytest.mark.parametrize(
    ("size", "expected"),
    [
        ((3000, 4000), (1176, 1568)),
        ((6000, 500), (1568, 131)),
        ((1600, 1600), (1568, 1568)),
    ],
)
def test_downscale_keeps_the_aspect_ratio(
    size: tuple[int, int], expected: tuple[int, int]
) -> None:
    out, _ = media.fit(encode(photo(*size), "JPEG"), None, LIMITS)
    assert decoded(out).size == expected


def test_max_side_is_a_parameter() -> None:
    out, _ = media.fit(encode(photo(800, 600), "PNG"), None, ImageLimits(max_side=200))
    assert decoded(out).size == (200, 150)


def test_transparency_keeps_png() -> None:
    out, media_type = media.fit(
        encode(with_hole(photo(3000, 2000)), "PNG", compress_level=1), None, LIMITS
    )
    assert media_type == "image/png"
    im = decoded(out)
    assert im.size == (1568, 1045)
    assert im.mode == "RGBA"
    assert im.getchannel("A").getextrema() == (0, 255)


def test_opaque_alpha_band_does_not_force_png() -> None:
    data = encode(photo(2400, 1600).convert("RGBA"), "PNG", compress_level=1)
    out, media_type = media.fit(data, None, LIMITS)
    assert media_type == "image/jpeg"
    assert decoded(out).mode == "RGB"


def test_few_colours_keep_png_and_their_colours() -> None:
    source = flat(3200, 2000)
    out, media_type = media.fit(encode(source, "PNG"), None, LIMITS)
    assert media_type == "image/png"
    assert decoded(out).size == (1568, 980)


def test_palette_gif_over_the_limit_becomes_png() -> None:
    data = encode(flat(2000, 1000).convert("P"), "GIF")
    out, media_type = media.fit(data, None, LIMITS)
    assert media_type == "image/png"
    assert decoded(out).size == (1568, 784)


def test_cmyk_jpeg_becomes_rgb_jpeg() -> None:
    data = encode(photo(2000, 1500).convert("CMYK"), "JPEG")
    out, media_type = media.fit(data, None, LIMITS)
    assert media_type == "image/jpeg"
    assert decoded(out).mode == "RGB"


def test_sixteen_bit_greyscale_is_scaled_not_clipped() -> None:
    ramp = Image.linear_gradient("L").resize((2000, 1000)).convert("I")
    wide = ramp.point(lambda v: v * 257).convert("I;16")  # 0..65535
    data = encode(wide, "PNG")
    assert decoded(data).mode.startswith("I")
    out, _ = media.fit(data, None, LIMITS)
    lo, hi = decoded(out).convert("L").getextrema()
    assert isinstance(lo, (int, float)) and isinstance(hi, (int, float))  # one band
    assert lo < 10 and hi > 245  # clipping would leave almost everything white


def test_exif_orientation_is_applied_when_re_encoding() -> None:
    source = Image.new("RGB", (400, 200), (255, 0, 0))
    source.paste((0, 0, 255), (200, 0, 400, 200))  # left red, right blue
    exif = Image.Exif()
    exif[0x0112] = 6
    data = encode(source, "JPEG", exif=exif)
    out, _ = media.fit(data, None, ImageLimits(max_side=100))
    upright = ImageOps.exif_transpose(decoded(data))
    got = decoded(out)
    assert got.size == (50, 100)
    expected = upright.resize(got.size)
    for xy in [(25, 10), (25, 90)]:
        pixel, want = got.getpixel(xy), expected.getpixel(xy)
        assert isinstance(pixel, tuple) and isinstance(want, tuple)  # RGB
        assert all(abs(a - b) < 40 for a, b in zip(pixel, want, strict=True))


def test_quality_then_size_step_down_to_fit_max_bytes() -> None:
    data = encode(photo(1500, 1000), "PNG", compress_level=1)
    limits = ImageLimits(max_bytes=40_000)
    out, media_type = media.fit(data, None, limits)
    assert media_type == "image/jpeg"
    assert b64_len(len(out)) <= 40_000
    w, h = decoded(out).size
    assert abs(w / h - 1.5) < 0.02


def test_png_with_transparency_shrinks_to_fit_max_bytes() -> None:
    data = encode(with_hole(photo(1200, 800)), "PNG", compress_level=1)
    out, media_type = media.fit(data, None, ImageLimits(max_bytes=150_000))
    assert media_type == "image/png"
    assert b64_len(len(out)) <= 150_000
    assert decoded(out).width < 1200


def test_unreachable_max_bytes_is_unusable() -> None:
    with pytest.raises(media.UnusableImage, match="does not get under 64 base64 bytes"):
        media.fit(encode(photo(600, 400), "PNG"), None, ImageLimits(max_bytes=64))


def test_too_many_bytes_alone_triggers_a_re_encode() -> None:
    data = encode(photo(1200, 900), "PNG", compress_level=0)  # within max_side
    limits = ImageLimits(max_bytes=b64_len(len(data)) - 1)
    out, media_type = media.fit(data, None, limits)
    assert media_type == "image/jpeg"
    assert decoded(out).size == (1200, 900)


def _chunk(kind: bytes, body: bytes) -> bytes:
    return (
        struct.pack(">I", len(body))
        + kind
        + body
        + struct.pack(">I", zlib.crc32(kind + body))
    )


def _png_header(width: int, height: int) -> bytes:
    """A PNG signature, header and a little pixel data: about 60 bytes."""
    ihdr = struct.pack(">IIBBBBB", width, height, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n"
        + _chunk(b"IHDR", ihdr)
        + _chunk(b"IDAT", zlib.compress(bytes(64)))
    )


def test_bomb_header_is_refused_before_decoding() -> None:
    with pytest.raises(media.UnusableImage, match="decompression-bomb limit"):
        media.fit(_png_header(100_000, 100_000), None, LIMITS)


@pytest.mark.parametrize("side", [1100, 1500])  # Pillow's warning band, its error band
def test_bomb_limit_follows_max_image_pixels(
    monkeypatch: pytest.MonkeyPatch, side: int
) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1_000_000)
    data = encode(flat(side, side), "PNG")
    with pytest.raises(media.UnusableImage, match=f"{side}x{side} pixels is over"):
        media.fit(data, None, LIMITS)
    assert media.fit(encode(flat(900, 900), "PNG"), None, LIMITS)[1] == "image/png"


def test_unlimited_max_image_pixels_disables_the_check(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", None)
    assert media.fit(encode(flat(100, 100), "PNG"), None, LIMITS)[1] == "image/png"


@pytest.mark.parametrize("size", [(300, 200), (3000, 2000)])  # pass-through, re-encode
def test_truncated_jpeg_is_unusable(size: tuple[int, int]) -> None:
    data = encode(photo(*size), "JPEG")
    with pytest.raises(media.UnusableImage, match="corrupt or truncated JPEG"):
        media.fit(data[: len(data) // 2], None, LIMITS)


@pytest.mark.parametrize(
    "data",
    [
        b"\x89PNG\r\n\x1a\n" + b"garbage" * 20,
        b"\xff\xd8\xff\xe0" + bytes(range(256)) * 3,
        b"GIF89a\x01",
        _png_header(40, 30)[:33] + _chunk(b"IDAT", b"not zlib data at all"),
    ],
)
def test_corrupt_image_is_unusable(data: bytes) -> None:
    with pytest.raises(media.UnusableImage, match="corrupt or truncated"):
        media.fit(data, None, LIMITS)


def test_unknown_bytes_are_unusable_and_the_message_is_short() -> None:
    with pytest.raises(media.UnusableImage) as info:
        media.fit(b"#!/bin/sh\necho this is a shell script\n", "image/png", LIMITS)
    assert str(info.value) == (
        "not a PNG, JPEG, GIF or WebP image (38 bytes, labelled image/png)"
    )


def test_reasons_are_clipped() -> None:
    data = encode(photo(300, 200), "PNG")
    with pytest.raises(media.UnusableImage) as info:
        media.fit(data[:-40], None, LIMITS)
    assert len(str(info.value)) <= 120


def test_bytes_like_inputs_give_bytes() -> None:
    data = encode(photo(40, 30), "PNG")
    for value in (bytearray(data), memoryview(data)):
        out, _ = media.fit(value, None, LIMITS)
        assert type(out) is bytes and out == data
