"""base64 and the token estimate: compiled core against pure twin and the usual tools.

    python bench/bench_text.py [--repeat 5] [--limit 200000]

b64encode on 1 KiB, 64 KiB, 1 MiB and 8 MiB of random bytes: the Cython core, the pure
twin, ``binascii.b2a_base64(data, newline=False)`` and ``base64.b64encode(data)``.
estimate_tokens on the real text of bench/token_error.py (both halves, --limit
characters per half and category): Cython, pure twin, tiktoken o200k_base ``encode``
and ``len(text.split()) * 1.3``.

Prints best-of-N times and each one's speed relative to the compiled core, measured in
this run. Exits 1 when a goal is missed: b64encode >= 2x binascii on 1 MiB and 8 MiB,
estimate_tokens >= 10x tiktoken. Needs the compiled core (build it first).
"""

from __future__ import annotations

import argparse
import base64
import binascii
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

# Run from a plain checkout without installing.
sys.path.insert(0, str(Path(__file__).absolute().parent.parent))

import _record
import token_error

import navi_core._core_py as pure

__all__ = ["best", "compare"]

B64_SIZES = {"1 KiB": 1 << 10, "64 KiB": 64 << 10, "1 MiB": 1 << 20, "8 MiB": 8 << 20}
B64_GOAL = 2.0  # x binascii, on 1 MiB and 8 MiB
TOKENS_GOAL = 10.0  # x tiktoken


def best(fn: Callable[[], object], repeat: int, budget: float = 0.05) -> float:
    """Best-of-``repeat`` seconds per call, looping each sample for about ``budget`` s."""
    start = time.perf_counter()
    fn()
    once = max(time.perf_counter() - start, 1e-7)
    loops = max(1, int(budget / once))
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        for _ in range(loops):
            fn()
        times.append((time.perf_counter() - start) / loops)
    return min(times)


def compare(title: str, rows: dict[str, float], unit: float, unit_name: str) -> None:
    """Print each row's time, throughput and speed relative to the first row."""
    first = next(iter(rows.values()))
    print(
        f"\n{title} {'time':>{max(4, 43 - len(title))}}  {'throughput':>17}  speed vs 1st"
    )
    for name, seconds in rows.items():
        print(
            f"  {name:28} {seconds * 1e6:10.1f} us  {unit / seconds / 1e6:9.1f} {unit_name}/s"
            f"  {first / seconds:7.2f}x"
        )
    _record.table(
        title,
        ["contender", "time us", f"{unit_name}/s", "speed vs the first row"],
        [
            [name, f"{seconds * 1e6:,.1f}", f"{unit / seconds / 1e6:,.1f}",
             f"{first / seconds:.2f}x"]
            for name, seconds in rows.items()
        ],
    )  # fmt: skip


def bench_b64(cy: ModuleType, repeat: int) -> bool:
    ok = True
    for label, size in B64_SIZES.items():
        data = os.urandom(size)
        assert cy.b64encode(data) == base64.b64encode(data).decode()
        rows = {
            "navi_core Cython b64encode": best(lambda d=data: cy.b64encode(d), repeat),
            "navi_core pure b64encode": best(lambda d=data: pure.b64encode(d), repeat),
            "binascii.b2a_base64": best(
                lambda d=data: binascii.b2a_base64(d, newline=False), repeat
            ),
            "base64.b64encode": best(lambda d=data: base64.b64encode(d), repeat),
        }
        compare(f"b64encode, {label}", rows, size, "MB")
        ratio = rows["binascii.b2a_base64"] / rows["navi_core Cython b64encode"]
        if size >= 1 << 20:
            print(f"  Cython vs binascii: {ratio:.2f}x (goal {B64_GOAL:.0f}x)")
            ok &= ratio >= B64_GOAL
            _record.goal(
                f"b64encode {label}: Cython >= {B64_GOAL:.0f}x binascii ({ratio:.2f}x)",
                ratio >= B64_GOAL,
            )
    return ok


def bench_tokens(cy: ModuleType, texts: Sequence[str], repeat: int) -> bool:
    encode = token_error.o200k()
    chars = sum(map(len, texts))

    def over(fn: Callable[[str], object]) -> Callable[[], None]:
        def run() -> None:
            for text in texts:
                fn(text)

        return run

    rows = {
        "navi_core Cython estimate": best(over(cy.estimate_tokens), repeat, 0),
        "navi_core pure estimate": best(over(pure.estimate_tokens), 1, 0),
        "tiktoken o200k encode": best(over(encode), repeat, 0),
        "len(text.split()) * 1.3": best(over(token_error.split_heuristic), repeat, 0),
    }
    compare(
        f"estimate_tokens, {chars:,} characters of real text", rows, chars, "M chars"
    )
    ratio = rows["tiktoken o200k encode"] / rows["navi_core Cython estimate"]
    print(f"  Cython vs tiktoken: {ratio:.1f}x (goal {TOKENS_GOAL:.0f}x)")
    _record.goal(
        f"estimate_tokens: Cython >= {TOKENS_GOAL:.0f}x tiktoken ({ratio:.1f}x)",
        ratio >= TOKENS_GOAL,
    )
    return ratio >= TOKENS_GOAL


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument(
        "--limit", type=int, default=200_000, help="characters per half"
    )
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)
    try:
        import navi_core._core as cy
    except ImportError:
        print("the compiled core is not built: python setup.py build_ext --inplace")
        return 1
    texts = [
        t
        for halves in token_error.corpus(args.limit).values()
        for half in halves
        for t in half
    ]
    ok = bench_b64(cy, args.repeat)
    ok &= bench_tokens(cy, texts, args.repeat)
    print("\nall goals met" if ok else "\nGOAL MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
