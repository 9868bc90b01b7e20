"""The media benchmark's quality claim, on a smaller picture: same size, PSNR >= 35 dB."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest
from imagekit import decoded

from navi_core.config import ImageLimits


@pytest.fixture(scope="module")
def bench() -> ModuleType:
    path = Path(__file__).parents[2] / "bench" / "bench_media.py"
    spec = importlib.util.spec_from_file_location("bench_media", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_media"] = module  # dataclasses look their module up by name
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("fmt", ["JPEG", "PNG"])
def test_pipeline_matches_the_straightforward_output(
    bench: ModuleType, fmt: str
) -> None:
    limits = ImageLimits(max_side=900)
    data = bench.source_bytes(bench.photo(2400, 1800), fmt)
    plain = bench.straightforward(data, limits)
    fast = bench.navi(data, limits)
    assert decoded(fast.image).size == decoded(plain.image).size == (900, 675)
    assert fast.media_type == "image/jpeg"
    assert bench.psnr(fast.image, plain.image) >= bench.MIN_PSNR
    assert fast.body.count(b'"type":"image"') == 1


def test_psnr_measures_difference(bench: ModuleType) -> None:
    picture = bench.photo(300, 200)
    png = bench.source_bytes(picture, "PNG")
    assert bench.psnr(png, png) == float("inf")
    rough = bench.source_bytes(picture.reduce(4).resize(picture.size), "PNG")
    assert 15 < bench.psnr(png, rough) < 35


def test_psnr_without_numpy_agrees(
    bench: ModuleType, monkeypatch: pytest.MonkeyPatch
) -> None:
    picture = bench.photo(300, 200)
    a = bench.source_bytes(picture, "PNG")
    b = bench.source_bytes(picture, "JPEG")
    with_numpy = bench.psnr(a, b)
    monkeypatch.setitem(sys.modules, "numpy", None)  # import numpy now fails
    assert bench.psnr(a, b) == pytest.approx(with_numpy, abs=1e-6)
