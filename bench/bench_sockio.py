"""The socket calls that keep the GIL, against the calls they replaced, in one process.

``bench_threads.py``'s crews (T threads, one provider each, whole 2,000-chunk turns from
``bench/server.py``) run with the connection's non-waiting calls on and off, interleaved
round by round, so a slow minute of the machine falls on both. Off puts back what a
connection did before: every read waits in ``socket.recv`` and every write in
``sendall`` (both give the GIL away), the idle check is a ``select``, and ids come from
``os.urandom``. Printed per T: median events/s, the median of each round's ratio to T=1,
CPU µs per event, and on over off.

    python bench/bench_sockio.py                  # T = 1, 8, 64; 10 rounds
    python bench/bench_sockio.py --switch-interval 0.05
"""

from __future__ import annotations

import argparse
import os
import select
import socket
import statistics
import sys

from bench_threads import CHUNKS, Crew, Result, navi, server

from navi_core import _ids as ids
from navi_core._turn import extras as turn_extras
from navi_core.core import IMPLEMENTATION
from navi_core.providers import _sockets
from navi_core.store import null

_NEW = (_sockets.recv_ready, _sockets.send_ready, _sockets.readable, ids.new_id)


def _urandom_id() -> str:
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return b.hex()


def _select_readable(sock: socket.socket) -> bool:
    try:
        ready, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return True
    return bool(ready)


_OLD = (lambda sock, size: None, lambda sock, data: 0, _select_readable, _urandom_id)


def _use(on: bool) -> None:
    recv, send, readable, new_id = _NEW if on else _OLD
    _sockets.recv_ready, _sockets.send_ready, _sockets.readable = recv, send, readable
    turn_extras.new_id = null.new_id = new_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", default="1,8,64", help="comma-separated T")
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--events", type=int, default=256_000, help="per point")
    parser.add_argument("--switch-interval", type=float, help="sys.setswitchinterval")
    args = parser.parse_args()
    if args.switch_interval is not None:
        sys.setswitchinterval(args.switch_interval)
    counts = [int(t) for t in args.threads.split(",")]
    print(
        f"core: {IMPLEMENTATION}; {CHUNKS:,}-chunk turns; {args.rounds} rounds, on and"
        f" off in turns; GIL switch interval {sys.getswitchinterval() * 1e3:g} ms"
    )
    results: dict[bool, dict[int, list[Result]]] = {False: {}, True: {}}
    with server(CHUNKS) as url:
        crews = {t: Crew(navi, url, t) for t in counts}
        for crew in crews.values():  # warm-up: connections open, code paths hot
            crew.turns(1)
        for r in range(args.rounds):
            for on in (False, True) if r % 2 == 0 else (True, False):
                _use(on)
                for t, crew in crews.items():
                    per_thread = max(1, args.events // (t * CHUNKS))
                    results[on].setdefault(t, []).append(crew.turns(per_thread))
        _use(True)
        for crew in crews.values():
            crew.stop()
    base = counts[0]
    print(
        f"{'calls':>6} {'threads':>8} {'events/s':>11} {f'vs T={base}':>8} {'CPU µs/ev':>10}"
    )
    for on in (False, True):
        for t in counts:
            parts = results[on][t]
            ratio = statistics.median(
                p.rate / b.rate for p, b in zip(parts, results[on][base], strict=True)
            )
            cpu = statistics.median(p.cpu / p.events * 1e6 for p in parts)
            rate = statistics.median(p.rate for p in parts)
            print(
                f"{'new' if on else 'old':>6} {t:>8} {rate:>11,.0f} {ratio:>7.2f}x {cpu:>10.2f}"
            )
    print("new / old, median events/s:")
    for t in counts:
        new = statistics.median(p.rate for p in results[True][t])
        old = statistics.median(p.rate for p in results[False][t])
        print(f"{t:>8} {new / old:>8.2f}x")


if __name__ == "__main__":
    main()
