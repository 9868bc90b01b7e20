"""Read and parse sizes of a streamed body, against the sizes they replaced, in one process.

First, reads of one event each, what a model streaming token by token gives: a peer on a
socket pair writes one 206-byte SSE event, the connection's ``read`` takes it, over
plain TCP and over TLS, each read size in turn. Printed: the reading thread's CPU µs per
read, page faults per read, and each size against the baseline. A buffer of 128 KiB or
more is above glibc's mmap threshold until something in the process frees a larger
mapped block: each read then maps new pages, shrinks them to the bytes received
(``mremap``) and unmaps them when freed.

Then ``bench_threads.py``'s crews (T threads, one provider each, whole 2,000-chunk turns
from ``bench/server.py``) run with each (read, parse) pair of sizes in turn, round by
round, so a slow minute of the machine falls on all of them. The first pair is the
baseline: 256 KiB reads parsed in 16 KiB slices, what a connection did before. Printed
per pair and T: median events/s, CPU µs per event, the process's minor page faults per
turn, the median of each round's ratio to the baseline, and 64 threads (or the largest
T) over one. A read's buffer and h11's copies of it are allocations of the read's size.
At 256 KiB, several of them alive at once grow a thread's malloc arena past its trim
threshold, the arena gives the pages back when they are freed, and the next read takes
new ones: the page faults grow with the thread count.

    python bench/bench_reads.py                       # T = 1, 8, 64; 8 rounds
    python bench/bench_reads.py --pairs 256:16,32:16,32:32 --threads 1,64
"""

from __future__ import annotations

import argparse
import resource
import socket
import ssl
import statistics
import threading
import time

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


EVENT = b'data: {"choices":[{"delta":{"content":"' + b"y" * 160 + b'"}}]}\n\n'


def _pair(tls: bool) -> tuple[socket.socket, socket.socket]:
    """A connected (peer, reader) pair of sockets; with ``tls``, a TLS session over
    it (a throwaway CA from ``trustme``)."""
    peer, reader = socket.socketpair()
    if not tls:
        return peer, reader
    import trustme

    ca = trustme.CA()
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost").configure_cert(server)
    client = ssl.create_default_context()
    ca.configure_trust(client)
    wrapped: list[socket.socket] = []
    shake = threading.Thread(
        target=lambda: wrapped.append(server.wrap_socket(peer, server_side=True))
    )
    shake.start()
    reader = client.wrap_socket(reader, server_hostname="localhost")
    shake.join()
    return wrapped[0], reader


def small_reads(pairs: list[tuple[int, int]], reads: int, rounds: int) -> None:
    """CPU per read of one event, plain and TLS, the sizes interleaved."""
    print(
        f"reads of one {len(EVENT)}-byte event: {rounds} rounds of {reads:,} reads"
        " per size and transport"
    )
    print(
        f"{'transport':>9} {'read KiB':>8} {'CPU µs/read':>12} {'faults/read':>12}"
        f" {'vs base':>8}"
    )
    sizes = list(dict.fromkeys(r for r, _ in pairs))
    kept = _sockets.READ_BYTES
    for tls in (False, True):
        peer, sock = _pair(tls)
        stream = _sockets._SocketStream(sock)
        costs: dict[int, list[tuple[float, float]]] = {}
        for r in range(rounds):
            for kib in sizes if r % 2 == 0 else sizes[::-1]:
                _sockets.READ_BYTES = kib * KIB
                spent = 0
                before = _faults()
                for _ in range(reads):
                    peer.sendall(EVENT)
                    t0 = time.thread_time_ns()
                    got = _READ(stream, kib * KIB, 10.0)
                    spent += time.thread_time_ns() - t0
                    assert got == EVENT, got
                costs.setdefault(kib, []).append(
                    (spent / reads / 1000, (_faults() - before) / reads)
                )
        peer.close()
        stream.close()
        for kib in sizes:
            mine, base = costs[kib], costs[sizes[0]]
            ratio = statistics.median(
                m[0] / b[0] for m, b in zip(mine, base, strict=True)
            )
            print(
                f"{'TLS' if tls else 'plain':>9} {kib:>8}"
                f" {statistics.median(c for c, _ in mine):>12.2f}"
                f" {statistics.median(f for _, f in mine):>12.2f} {ratio:>7.2f}x"
            )
    _sockets.READ_BYTES = kept


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
    parser.add_argument(
        "--small-reads",
        type=int,
        default=2_000,
        help="reads of one event per round (0: none)",
    )
    args = parser.parse_args()
    counts = [int(t) for t in args.threads.split(",")]
    pairs = [
        (int(r), int(p)) for r, p in (pair.split(":") for pair in args.pairs.split(","))
    ]
    # first, while nothing has moved malloc's thresholds: a freed 256 KiB read that
    # filled its buffer raises the mmap threshold for the rest of the process
    if args.small_reads:
        small_reads(pairs, args.small_reads, args.rounds)
    print(
        f"\ncore: {IMPLEMENTATION}; {CHUNKS:,}-chunk turns; {args.rounds} rounds, the"
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
