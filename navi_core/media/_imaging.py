"""The Pillow pipeline: sniff an image's format and fit it within ``ImageLimits``.

``fit`` is the fast way to an image within ``ImageLimits``. An image already within
the limits, in a format both providers accept, passes through untouched. Any other is
decoded at a reduced scale where the format allows it (JPEG DCT scaling through
``draft``), shrunk by an integer box reduction, resampled once to the exact size and
re-encoded: JPEG (quality 85) for photos, PNG for transparency and few colours; if
that is still too big, quality and then size step down. ``ImageLimits.max_bytes``
bounds the base64 text, which is what Anthropic measures its cap on.

Decompression bombs are refused by checking the pixel count against Pillow's
``Image.MAX_IMAGE_PIXELS`` before anything is decoded, so Pillow has no reason to warn;
this avoids ``warnings.catch_warnings``, which swaps process-wide state and is not safe
on the threads tools run on.

``open_image``, ``scaled``, ``normalize``, ``resample`` and ``encode`` are the steps of
``fit``, public so the media benchmark can time them one by one.
"""

from __future__ import annotations

import io
import math
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Final, TypeAlias

from ..config import ImageLimits

if TYPE_CHECKING:
    from PIL import Image

__all__ = [
    "ACCEPTED_TYPES",
    "DEFAULT_LIMITS",
    "BytesLike",
    "UnusableImage",
    "as_bytes",
    "encode",
    "fit",
    "fit_image",
    "normalize",
    "open_image",
    "resample",
    "scaled",
    "sniff",
]

BytesLike: TypeAlias = "bytes | bytearray | memoryview"

#: What both providers take as they are; BMP and TIFF are recognised and converted.
ACCEPTED_TYPES: Final = frozenset(
    {"image/png", "image/jpeg", "image/gif", "image/webp"}
)

_NAMES: Final = {
    "image/png": "PNG",
    "image/jpeg": "JPEG",
    "image/gif": "GIF",
    "image/webp": "WebP",
    "image/bmp": "BMP",
    "image/tiff": "TIFF",
}
_BMP_HEADER_SIZES: Final = frozenset({12, 40, 52, 56, 64, 108, 124})

_JPEG_QUALITY: Final = 85
_MIN_JPEG_QUALITY: Final = 55
_FEW_COLOURS: Final = 256
_FEW_GREYS: Final = 32
# RGB images smaller than this stay PNG: sharp, and small enough either way.
_PHOTO_MIN_PIXELS: Final = 512 * 512
# Pillow reduces by int(ratio / gap) before resampling; 1.0 means "as far as an
# integer factor goes", leaving the final filter a ratio below 2.
_REDUCING_GAP: Final = 1.0
_MAX_ENCODES: Final = 12
_MAX_REASON: Final = 120
DEFAULT_LIMITS: Final = ImageLimits()

_EXIF_ORIENTATION: Final = 0x0112


class UnusableImage(ValueError):
    """The value cannot become an image a provider accepts; the message says why."""


def sniff(data: BytesLike) -> str | None:
    """The image media type announced by the leading magic bytes, or None."""
    head = bytes(memoryview(data)[:32])
    if head.startswith(b"\x89PNG\r\n\x1a\n"):
        return "image/png"
    if head.startswith(b"\xff\xd8\xff"):
        return "image/jpeg"
    if head[:6] in (b"GIF87a", b"GIF89a"):
        return "image/gif"
    if head[:4] == b"RIFF" and head[8:12] == b"WEBP":
        return "image/webp"
    if head[:4] in (b"II*\x00", b"MM\x00*"):
        return "image/tiff"
    if head[:2] == b"BM" and int.from_bytes(head[14:18], "little") in _BMP_HEADER_SIZES:
        return "image/bmp"
    return None


def fit(
    data: BytesLike,
    media_type: str | None = None,
    limits: ImageLimits = DEFAULT_LIMITS,
) -> tuple[bytes, str]:
    """Bring an image within ``limits``, in a format both providers accept.

    Returns ``(bytes, media_type)``: ``data`` itself when it fits already, else a new
    encoding. ``media_type`` is a hint; the magic number decides and a wrong label is
    corrected. Raises ``UnusableImage`` for anything that is not a usable image.
    """
    raw = data if isinstance(data, bytes) else as_bytes(data)
    kind = sniff(raw)
    if kind is None:
        label = f", labelled {media_type}" if media_type else ""
        raise UnusableImage(
            f"not a PNG, JPEG, GIF or WebP image ({len(raw)} bytes{label})"
        )
    with _pillow_errors(f"{_NAMES[kind]} image ({len(raw)} bytes)"):
        im = open_image(raw, kind)
        target = scaled(im.size, limits.max_side)
        if (
            kind in ACCEPTED_TYPES
            and target == im.size
            and _b64_len(len(raw)) <= limits.max_bytes
        ):
            _verify(im, kind)
            return raw, kind
        box = None
        if kind == "image/jpeg" and target != im.size:
            drafted = im.draft(None, target)  # decode at 1/2, 1/4 or 1/8 scale
            box = drafted[1] if drafted is not None else None
        return _encode_within(im, target, box, kind == "image/jpeg", limits)


def fit_image(im: Image.Image, limits: ImageLimits) -> tuple[bytes, str]:
    """Encode a Pillow image within ``limits``: PNG, or JPEG for large RGB photos."""
    with _pillow_errors(f"{im.mode} image of {im.width}x{im.height} pixels"):
        target = scaled(im.size, limits.max_side)
        return _encode_within(im, target, None, im.format == "JPEG", limits)


@contextmanager
def _pillow_errors(what: str) -> Iterator[None]:
    """Turn Pillow's many ways of rejecting data into one ``UnusableImage``."""
    try:
        yield
    except (UnusableImage, MemoryError):
        raise
    except Exception as exc:
        # Pillow reports bad data as OSError, SyntaxError, ValueError, struct.error,
        # EOFError and more, so anything else raised here is the data's fault.
        from PIL import Image

        bomb = (Image.DecompressionBombError, Image.DecompressionBombWarning)
        if isinstance(exc, bomb):
            reason = f"{what} is over the decompression-bomb limit"
        else:
            reason = f"corrupt or truncated {what}: {str(exc) or type(exc).__name__}"
        if len(reason) > _MAX_REASON:
            reason = reason[: _MAX_REASON - 3] + "..."
        raise UnusableImage(reason) from exc


def open_image(raw: bytes, kind: str) -> Image.Image:
    """Open lazily with the format's own plugin, refusing a bomb before Pillow warns."""
    from PIL import Image

    im = _plugin(kind)(io.BytesIO(raw))
    w, h = im.size
    limit = Image.MAX_IMAGE_PIXELS
    if limit is not None and w * h > limit:
        raise UnusableImage(
            f"{_NAMES[kind]} image of {w}x{h} pixels is over the "
            f"{limit}-pixel decompression-bomb limit"
        )
    return im


def _plugin(kind: str) -> Callable[[io.BytesIO], Image.Image]:
    """The Pillow plugin for a sniffed type (``Image.open`` would warn on bombs)."""
    if kind == "image/png":
        from PIL.PngImagePlugin import PngImageFile

        return PngImageFile
    if kind == "image/jpeg":
        from PIL.JpegImagePlugin import JpegImageFile

        return JpegImageFile
    if kind == "image/gif":
        from PIL.GifImagePlugin import GifImageFile

        return GifImageFile
    if kind == "image/webp":
        from PIL.WebPImagePlugin import WebPImageFile

        return WebPImageFile
    if kind == "image/bmp":
        from PIL.BmpImagePlugin import BmpImageFile

        return BmpImageFile
    from PIL.TiffImagePlugin import TiffImageFile

    return TiffImageFile


def _verify(im: Image.Image, kind: str) -> None:
    """Decode a pass-through image, so a corrupt file is dropped, not sent."""
    if kind == "image/jpeg":
        # Entropy decoding still reads every byte; 1/8 scale skips most of the IDCT.
        im.draft(None, (max(1, im.width // 8), max(1, im.height // 8)))
    im.load()


def _encode_within(
    im: Image.Image,
    target: tuple[int, int],
    box: tuple[float, float, float, float] | None,
    from_jpeg: bool,
    limits: ImageLimits,
) -> tuple[bytes, str]:
    """Resample to ``target`` and encode, stepping quality, then size, down to fit."""
    im.load()
    orientation = _orientation(im)
    base = normalize(im)
    few = _FEW_GREYS if base.mode in ("L", "LA") else _FEW_COLOURS
    photo = from_jpeg or (
        target[0] * target[1] >= _PHOTO_MIN_PIXELS and base.getcolors(few) is None
    )
    size, quality = target, _JPEG_QUALITY
    budget = limits.max_bytes // 4 * 3
    small = _transpose(resample(base, size, box), orientation)
    fmt = "JPEG" if photo and not _has_alpha(small) else "PNG"
    for _ in range(_MAX_ENCODES):
        out = encode(small, fmt, quality)
        if _b64_len(len(out)) <= limits.max_bytes:
            return out, "image/jpeg" if fmt == "JPEG" else "image/png"
        if fmt == "JPEG" and quality > _MIN_JPEG_QUALITY:
            quality -= 10
            continue
        shrink = min(0.9, max(0.5, math.sqrt(budget / len(out))))
        size = (max(1, int(size[0] * shrink)), max(1, int(size[1] * shrink)))
        small = _transpose(resample(base, size, box), orientation)
    raise UnusableImage(
        f"image does not get under {limits.max_bytes} base64 bytes at any size"
    )


def scaled(size: tuple[int, int], max_side: int) -> tuple[int, int]:
    """``size`` shrunk to fit ``max_side``, keeping the aspect ratio."""
    w, h = size
    if max(w, h) <= max_side:
        return size
    scale = max_side / max(w, h)
    return max(1, round(w * scale)), max(1, round(h * scale))


def normalize(im: Image.Image) -> Image.Image:
    """The image in L, LA, RGB or RGBA: the modes resampling and both encoders take."""
    mode = im.mode
    if mode in ("L", "RGB"):
        if "transparency" in im.info:
            return im.convert(mode + "A" if mode == "L" else "RGBA")
        return im
    if mode in ("LA", "RGBA"):
        return im
    if mode in ("P", "PA"):
        return im.convert(
            "RGBA" if mode == "PA" or "transparency" in im.info else "RGB"
        )
    if mode == "1":
        return im.convert("L")
    if mode.startswith("I;16"):
        return im.convert("I").point(lambda v: v * (1 / 256)).convert("L")
    if mode in ("I", "F"):
        return im.convert("L")
    return im.convert("RGBA" if mode in ("RGBa", "La") else "RGB")


def resample(
    im: Image.Image,
    size: tuple[int, int],
    box: tuple[float, float, float, float] | None,
) -> Image.Image:
    """Reduce by an integer factor, then take one filtered step to the exact size.

    ``box`` comes from a JPEG ``draft``: libjpeg's DCT scaling already band-limited the
    image, so when less than a halving remains a Hamming window (support 1) finishes
    the job at two thirds of the cost of bicubic. After a box ``reduce()`` the wider
    bicubic kernel hides the box filter's aliasing.
    """
    from PIL import Image

    if box is None and im.size == size:
        return im
    dct_scaled = box is not None and box[2] - box[0] < 2 * size[0]
    kernel = Image.Resampling.HAMMING if dct_scaled else Image.Resampling.BICUBIC
    return im.resize(size, kernel, box=box, reducing_gap=_REDUCING_GAP)


def _orientation(im: Image.Image) -> int:
    """The EXIF orientation (1 = upright); unreadable EXIF only loses the rotation."""
    try:
        value = im.getexif().get(_EXIF_ORIENTATION, 1)
    except Exception:  # Pillow raises many types on broken EXIF; the pixels are fine
        return 1
    return value if isinstance(value, int) and 1 <= value <= 8 else 1


def _transpose(im: Image.Image, orientation: int) -> Image.Image:
    """Apply an EXIF orientation, since re-encoding drops the tag."""
    from PIL import Image

    methods = {
        2: Image.Transpose.FLIP_LEFT_RIGHT,
        3: Image.Transpose.ROTATE_180,
        4: Image.Transpose.FLIP_TOP_BOTTOM,
        5: Image.Transpose.TRANSPOSE,
        6: Image.Transpose.ROTATE_270,
        7: Image.Transpose.TRANSVERSE,
        8: Image.Transpose.ROTATE_90,
    }
    method = methods.get(orientation)
    return im if method is None else im.transpose(method)


def _has_alpha(im: Image.Image) -> bool:
    """Whether any pixel is less than opaque."""
    if im.mode not in ("LA", "RGBA"):
        return False
    lo = im.getchannel("A").getextrema()[0]
    return isinstance(lo, (int, float)) and lo < 255


def encode(im: Image.Image, fmt: str, quality: int) -> bytes:
    """PNG, or JPEG at ``quality`` (an opaque alpha band is dropped first)."""
    out = io.BytesIO()
    if fmt == "JPEG":
        if im.mode in ("LA", "RGBA"):
            im = im.convert(im.mode[:-1])
        im.save(out, "JPEG", quality=quality)
    else:
        im.save(out, "PNG")
    return out.getvalue()


def _b64_len(n: int) -> int:
    """Length of the base64 text of ``n`` bytes."""
    return (n + 2) // 3 * 4


def as_bytes(data: BytesLike) -> bytes:
    """A bytes copy of a bytes-like value (any memoryview format, byte for byte)."""
    return data.tobytes() if isinstance(data, memoryview) else bytes(data)
