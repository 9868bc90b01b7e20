"""What making a provider costs, beside making a bare ``httpx.Client()``.

A web app that builds a provider per request pays this on every request. Measured in
the same run: the first ``OpenAIChat(...)`` of a fresh process (imports excluded),
then the median of later ones for an ``http://`` and an ``https://`` base URL, each
closed again, against ``httpx.Client()`` (which loads the CA bundle every time).

Run: ``python bench/bench_provider_make.py`` (``--rounds N``).
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from collections.abc import Callable

import httpx

from navi_core.providers.openai_chat import OpenAIChat

FIRST = """
import time, httpx
from navi_core.providers.openai_chat import OpenAIChat
start = time.perf_counter()
OpenAIChat("m", {url!r}).close()
mid = time.perf_counter()
httpx.Client().close()
print(mid - start, time.perf_counter() - mid)
"""


def median_ms(make: Callable[[], object], rounds: int) -> float:
    times = []
    for _ in range(rounds):
        start = time.perf_counter()
        made = make()
        times.append(time.perf_counter() - start)
        made.close()  # type: ignore[attr-defined]
    return statistics.median(times) * 1e3


def first(url: str) -> tuple[float, float]:
    out = subprocess.run(
        [sys.executable, "-c", FIRST.format(url=url)],
        capture_output=True, text=True, check=True,
    ).stdout.split()  # fmt: skip
    return float(out[0]) * 1e3, float(out[1]) * 1e3


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=40)
    args = parser.parse_args()
    client = median_ms(httpx.Client, args.rounds)
    print(f"httpx.Client(): {client:.3f} ms (baseline)")
    for url in ("http://127.0.0.1:8080/v1", "https://api.openai.com/v1"):
        made, bare = first(url)
        later = median_ms(lambda u=url: OpenAIChat("m", u), args.rounds)  # type: ignore[misc]
        print(
            f"OpenAIChat({url}): first {made:.2f} ms (httpx.Client() after it in that "
            f"process {bare:.2f} ms), later {later:.3f} ms = {later / client:.4f} x "
            "httpx.Client()"
        )


if __name__ == "__main__":
    main()
