"""Image makers shared by the media tests: photo-like, flat, transparent, encoded."""

from __future__ import annotations

import io
import random
from typing import Any

from PIL import Image, ImageDraw, ImageFilter


def encode(im: Image.Image, fmt: str, **options: Any) -> bytes:
    """``im`` saved in ``fmt``."""
    out = io.BytesIO()
    im.save(out, fmt, **options)
    return out.getvalue()


def decoded(data: bytes) -> Image.Image:
    """Fully decoded image bytes."""
    im = Image.open(io.BytesIO(data))
    im.load()
    return im


def photo(width: int, height: int, seed: int = 3) -> Image.Image:
    """A quick photo-like RGB picture: a smooth field, soft shapes and grain."""
    rng = random.Random(seed)
    field = Image.frombytes("RGB", (4, 3), rng.randbytes(36))
    img = field.resize((width, height), Image.Resampling.BICUBIC)
    draw = ImageDraw.Draw(img)
    r = max(1, min(width, height) // 8)
    for _ in range(12):
        x, y = rng.randrange(width), rng.randrange(height)
        draw.ellipse((x - r, y - r, x + r, y + r), fill=(rng.randrange(256), 90, 40))
    img = img.filter(ImageFilter.GaussianBlur(2))
    grain = Image.frombytes("L", (width, height), rng.randbytes(width * height))
    return Image.blend(img, grain.convert("RGB"), 0.05)


def flat(width: int, height: int) -> Image.Image:
    """A screenshot-like picture with a handful of colours."""
    img = Image.new("RGB", (width, height), (250, 250, 250))
    draw = ImageDraw.Draw(img)
    step = max(2, height // 20)
    for i, y in enumerate(range(0, height, step)):
        colour = (20, 60 + i % 3 * 40, 200)
        draw.rectangle(
            (width // 10, y, width - width // 10, y + step // 2), fill=colour
        )
    return img


def with_hole(im: Image.Image) -> Image.Image:
    """``im`` as RGBA with a fully transparent disc in the middle."""
    rgba = im.convert("RGBA")
    w, h = rgba.size
    ImageDraw.Draw(rgba).ellipse(
        (w // 4, h // 4, 3 * w // 4, 3 * h // 4), fill=(0, 0, 0, 0)
    )
    return rgba
