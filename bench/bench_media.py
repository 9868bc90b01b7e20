"""An image tool result from source bytes to request body: navi_core against the plain way.

    python bench/bench_media.py [--repeat 7] [--size 4000x3000]

The sources are one deterministic photo-like picture (smooth gradients, soft-edged
shapes, luma texture and sensor-like noise, so that codecs behave as on a photo), saved
as a camera-style JPEG (quality 92) and as a PNG.

navi_core: ``media.fit`` (JPEG decoded at a reduced scale through ``draft``, integer
box reduction, one Hamming or bicubic step; JPEG q85 for photos), ``core.b64encode``,
orjson.
Straightforward: full decode, LANCZOS resize to the same size, the source's format (JPEG
q85 or PNG), stdlib base64, json.dumps.

Prints best-of-N times per stage, the speed-up of the whole pipeline, the output sizes
and the PSNR of navi_core's output against the straightforward output. Exits 1 when a
goal is missed: >= 2.5x on the JPEG, >= 2x on the PNG, same dimensions, PSNR >= 35 dB.
"""

from __future__ import annotations

import argparse
import base64
import io
import json
import math
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from PIL import Image, ImageChops, ImageDraw, ImageFilter, ImageStat

# Run from a plain checkout without installing.
sys.path.insert(0, str(Path(__file__).absolute().parent.parent))

from navi_core import core, media
from navi_core.config import ImageLimits
from navi_core.media import _imaging as imaging

__all__ = ["Run", "navi", "photo", "psnr", "source_bytes", "straightforward"]

GOALS = {"image/jpeg": 2.5, "image/png": 2.0}
MIN_PSNR = 35.0


@dataclass
class Run:
    """One pass through a pipeline: seconds per stage, the image and the request body."""

    stages: dict[str, float] = field(default_factory=dict)
    image: bytes = b""
    media_type: str = ""
    body: bytes = b""


def photo(width: int, height: int, seed: int = 7) -> Image.Image:
    """A deterministic photo-like RGB picture."""
    rng = random.Random(seed)

    def noise(w: int, h: int, mode: str) -> Image.Image:
        return Image.frombytes(mode, (w, h), rng.randbytes(w * h * len(mode)))

    size = (width, height)
    img = noise(8, 6, "RGB").resize(size, Image.Resampling.BICUBIC)  # lighting, colour
    sky = Image.linear_gradient("L").resize(size).convert("RGB")
    img = Image.blend(img, sky, 0.3)
    draw = ImageDraw.Draw(img)
    short = min(size)
    for _ in range(40):
        x, y = rng.randrange(width), rng.randrange(height)
        r = rng.randrange(short // 40, short // 6)
        colour = (rng.randrange(256), rng.randrange(256), rng.randrange(256))
        if rng.random() < 0.5:
            draw.ellipse((x - r, y - r, x + r, y + r), fill=colour)
        else:
            corners = [
                (x + rng.randrange(-r, r), y + rng.randrange(-r, r)) for _ in range(5)
            ]
            draw.polygon(corners, fill=colour)
    img = img.filter(ImageFilter.GaussianBlur(2))  # lens softness
    texture = noise(width // 5, height // 5, "L").resize(size, Image.Resampling.BICUBIC)
    img = Image.blend(img, texture.convert("RGB"), 0.15)
    return Image.blend(img, noise(width, height, "L").convert("RGB"), 0.06)


def source_bytes(img: Image.Image, fmt: str) -> bytes:
    """The picture as a camera would store it (JPEG q92) or as a PNG."""
    out = io.BytesIO()
    img.save(out, fmt, **({"quality": 92} if fmt == "JPEG" else {}))
    return out.getvalue()


def _body(media_type: str, b64: str) -> dict[str, Any]:
    """An Anthropic-style request carrying the image in a tool result."""
    image = {"type": "base64", "media_type": media_type, "data": b64}
    result = {
        "type": "tool_result",
        "tool_use_id": "toolu_1",
        "content": [
            {"type": "text", "text": "screenshot attached"},
            {"type": "image", "source": image},
        ],
    }
    return {
        "model": "m",
        "max_tokens": 1024,
        "stream": True,
        "messages": [{"role": "user", "content": [result]}],
    }


def _timed(stages: dict[str, float], name: str, fn: Callable[[], Any]) -> Any:
    start = time.perf_counter()
    value = fn()
    stages[name] = time.perf_counter() - start
    return value


def straightforward(data: bytes, limits: ImageLimits) -> Run:
    """Full decode, LANCZOS to the limit, the source format, stdlib base64 and json."""
    run = Run()

    def decode() -> Image.Image:
        im = Image.open(io.BytesIO(data))
        im.load()
        return im

    im = _timed(run.stages, "decode", decode)
    fmt = im.format or "PNG"
    scale = min(1.0, limits.max_side / max(im.size))
    size = (max(1, round(im.width * scale)), max(1, round(im.height * scale)))
    small = _timed(
        run.stages, "resize", lambda: im.resize(size, Image.Resampling.LANCZOS)
    )

    def encode() -> bytes:
        out = io.BytesIO()
        small.save(out, fmt, **({"quality": 85} if fmt == "JPEG" else {}))
        return out.getvalue()

    run.image = _timed(run.stages, "encode", encode)
    run.media_type = Image.MIME[fmt]
    b64 = _timed(run.stages, "base64", lambda: base64.b64encode(run.image).decode())
    run.body = _timed(
        run.stages, "json", lambda: json.dumps(_body(run.media_type, b64)).encode()
    )
    return run


def navi(data: bytes, limits: ImageLimits) -> Run:
    """The real path: ``media.fit``, ``core.b64encode``, orjson."""
    run = Run()
    run.image, run.media_type = _timed(
        run.stages, "fit", lambda: media.fit(data, None, limits)
    )
    b64 = _timed(run.stages, "base64", lambda: core.b64encode(run.image))
    run.body = _timed(
        run.stages, "json", lambda: orjson.dumps(_body(run.media_type, b64))
    )
    return run


def fit_stages(
    data: bytes, limits: ImageLimits, media_type: str
) -> tuple[dict[str, float], bytes]:
    """The steps of ``media.fit`` run one by one, to time each (same output bytes)."""
    stages: dict[str, float] = {}
    kind = media.sniff(data) or ""
    target = imaging.scaled(imaging.open_image(data, kind).size, limits.max_side)

    def decode() -> tuple[Image.Image, Any]:
        im = imaging.open_image(data, kind)
        drafted = im.draft(None, target) if kind == "image/jpeg" else None
        im.load()
        return im, drafted[1] if drafted else None

    im, box = _timed(stages, "decode", decode)

    def resize() -> Image.Image:
        base = imaging.normalize(im)
        return imaging.resample(base, target, box)

    small = _timed(stages, "resize", resize)
    fmt = "JPEG" if media_type == "image/jpeg" else "PNG"
    out = _timed(stages, "encode", lambda: imaging.encode(small, fmt, 85))
    return stages, out


def psnr(a: bytes, b: bytes) -> float:
    """Peak signal-to-noise ratio of two encoded RGB images of one size, in dB."""
    ia = Image.open(io.BytesIO(a)).convert("RGB")
    ib = Image.open(io.BytesIO(b)).convert("RGB")
    try:
        import numpy as np
    except ImportError:
        diff = ImageChops.difference(ia, ib)
        mse = sum(ImageStat.Stat(diff).sum2) / (3 * ia.width * ia.height)
    else:
        d = np.asarray(ia, dtype=np.float64) - np.asarray(ib, dtype=np.float64)
        mse = float(np.mean(d * d))
    return math.inf if mse == 0 else 10 * math.log10(255**2 / mse)


def _best(runs: list[dict[str, float]]) -> dict[str, float]:
    return {k: min(r[k] for r in runs) for k in runs[0]}


def _ms(stages: dict[str, float]) -> str:
    return "  ".join(f"{k} {v * 1e3:7.1f}" for k, v in stages.items())


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--size", default="4000x3000")
    args = parser.parse_args(argv)
    width, height = (int(v) for v in args.size.split("x"))
    limits = ImageLimits()
    if max(width, height) <= limits.max_side:
        # media.fit sends such a picture as it is: nothing to resize, nothing to time
        parser.error(f"--size: a side must be over max_side ({limits.max_side} px)")
    print(
        f"core: {core.IMPLEMENTATION}; source {width}x{height}; best of {args.repeat}"
    )
    picture = photo(width, height)
    ok = True
    for fmt in ("JPEG", "PNG"):
        data = source_bytes(picture, fmt)
        mime = Image.MIME[fmt]
        base_runs, navi_runs, staged = [], [], []
        for _ in range(args.repeat):  # interleaved, so drift hits both alike
            base = straightforward(data, limits)
            fast = navi(data, limits)
            stages, staged_out = fit_stages(data, limits, fast.media_type)
            base_runs.append(base.stages)
            navi_runs.append(fast.stages)
            staged.append(stages)
        assert staged_out == fast.image, "fit_stages no longer mirrors media.fit"
        b, n = _best(base_runs), _best(navi_runs)
        ratio = sum(b.values()) / sum(n.values())
        with (
            Image.open(io.BytesIO(base.image)) as x,
            Image.open(io.BytesIO(fast.image)) as y,
        ):
            same = x.size == y.size
            dims = f"{y.width}x{y.height}" if same else f"{x.size} vs {y.size}"
        quality = psnr(fast.image, base.image)
        met = ratio >= GOALS[mime] and same and quality >= MIN_PSNR
        ok = ok and met
        print(f"\n{fmt} source: {len(data) / 1e6:.1f} MB")
        print(
            f"  straightforward ms: {_ms(b)}  total {sum(b.values()) * 1e3:7.1f}"
            f"  -> {base.media_type} {len(base.image) / 1e3:.0f} kB, body {len(base.body) / 1e3:.0f} kB"
        )
        print(
            f"  navi_core ms:       {_ms(n)}  total {sum(n.values()) * 1e3:7.1f}"
            f"  -> {fast.media_type} {len(fast.image) / 1e3:.0f} kB, body {len(fast.body) / 1e3:.0f} kB"
        )
        print(f"    fit breakdown ms: {_ms(_best(staged))}")
        print(
            f"  speed-up {ratio:.2f}x (goal {GOALS[mime]}x), output {dims}, "
            f"PSNR {quality:.2f} dB (goal {MIN_PSNR}): {'met' if met else 'MISSED'}"
        )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
