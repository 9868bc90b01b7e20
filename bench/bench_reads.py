"""Read and parse sizes of a streamed body, against the sizes they replaced, in one process.

``bench_threads.py``'s crews (T threads, one provider each, whole 2,000-chunk turns from
``bench/server.py``) run with each (read, parse) pair of sizes in turn, round by round,
so a slow minute of the machine falls on all of them. The first pair is the baseline:
256 KiB reads parsed in 16 KiB slices, what a connection did before. Printed per pair
and T: median events/s, CPU µs per event, the process's minor page faults per turn,
the median of each round's ratio to the baseline, and 64 threads (or the largest T)
over one.

A read's buffer and h11's copies of it are allocations of the read's size. At 256 KiB,
several of them alive at once grow a thread's malloc arena past its trim threshold, the
arena gives the pages back when they are freed, and the next read takes new ones: the
page faults grow with the thread count.

    python bench/bench_reads.py                       # T = 1, 8, 64; 8 rounds
    python bench/bench_reads.py --pairs 256:16,32:16,32:32 --threads 1,64
"""

from __future__ import annotations

import argparse
import resource
import statistics

from bench_threads import CHUNKS, Crew, Result, navi, server

from navi_core.core import IMPLEMENTATION
from navi_core.providers import _body, _sockets

KIB = 1024
_READ = _sockets._SocketStream.read


def _read_asked(
    self: _sockets._SocketStream, max_bytes: int, timeout: float | None = None
) -> bytes:
    """A read that asks for the pair's size (httpcore asks for 64 KiB)."""
    return _READ(self, _sockets.READ_BYTES, timeout)


def _use(read_kib: int, parse_kib: int) -> None:
    _sockets.READ_BYTES = read_kib * KIB
    _body.PARSE_BYTES = parse_kib * KIB


def _faults() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,8,64", help="comma-separated T")
    parser.add_argument(
        "--pairs",
        default=f"256:16,{_sockets.READ_BYTES // KIB}:{_body.PARSE_BYTES // KIB}",
        help="comma-separated read:parse sizes in KiB; the first is the baseline",
    )
    parser.add_argument("--rounds", type=int, default=8)
    parser.add_argument("--events", type=int, default=256_000, help="per point")
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    pairs = [
        (int(r), int(p)) for r, p in (pair.split(":") for pair in args.pairs.split(","))
    ]
    print(
        f"core: {IMPLEMENTATION}; {CHUNKS:,}-chunk turns; {args.rounds} rounds, the"
        f" pairs in turns; baseline {pairs[0][0]} KiB reads, {pairs[0][1]} KiB slices"
    )
    kept = (_sockets.READ_BYTES, _body.PARSE_BYTES)
    _sockets._SocketStream.read = _read_asked  # type: ignore[method-assign]
    results: dict[tuple[int, int, int], list[tuple[Result, float]]] = {}
    with server(CHUNKS) as url:
        crews = {t: Crew(navi, url, t) for t in counts}
        for crew in crews.values():  # warm-up: connections open, code paths hot
            crew.turns(1)
        for r in range(args.rounds):
            for pair in pairs if r % 2 == 0 else pairs[::-1]:
                _use(*pair)
                for t, crew in crews.items():
                    before = _faults()
                    part = crew.turns(max(1, args.events // (t * CHUNKS)))
                    per_turn = (_faults() - before) / part.turns
                    results.setdefault((*pair, t), []).append((part, per_turn))
        _sockets.READ_BYTES, _body.PARSE_BYTES = kept
        _sockets._SocketStream.read = _READ  # type: ignore[method-assign]
        for crew in crews.values():
            crew.stop()
    print(
        f"{'read KiB':>8} {'parse KiB':>9} {'threads':>8} {'events/s':>11}"
        f" {'CPU µs/ev':>10} {'faults/turn':>11} {'vs base':>8}"
    )
    for pair in pairs:
        for t in counts:
            parts = results[(*pair, t)]
            base = results[(*pairs[0], t)]
            rate = statistics.median(p.rate for p, _ in parts)
            cpu = statistics.median(p.cpu / p.events * 1e6 for p, _ in parts)
            faults = statistics.median(f for _, f in parts)
            ratio = statistics.median(
                p.rate / b.rate for (p, _), (b, _) in zip(parts, base, strict=True)
            )
            print(
                f"{pair[0]:>8} {pair[1]:>9} {t:>8} {rate:>11,.0f} {cpu:>10.2f}"
                f" {faults:>11.0f} {ratio:>7.2f}x"
            )
    top, one = max(counts), min(counts)
    print(f"T={top} over T={one}, the median of each round's ratio:")
    for pair in pairs:
        ratio = statistics.median(
            p.rate / b.rate
            for (p, _), (b, _) in zip(
                results[(*pair, top)], results[(*pair, one)], strict=True
            )
        )
        print(f"{pair[0]:>8} {pair[1]:>9} {ratio:>8.2f}x")


if __name__ == "__main__":
    main()
