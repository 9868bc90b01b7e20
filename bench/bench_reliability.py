"""What the reliability fixes cost: fenced PostgreSQL writes, the log filter.

* PostgreSQL ``append`` of one message to a session this store holds the lock of
  (fenced: one ``pg_locks`` check inside the write) against a session it does not
  hold (no fence), interleaved in rounds, same store, same run;
* one httpx-style INFO record through a logger with ``navi_core._logs.SECRET_FILTER``
  against the same logger without it (a ``NullHandler`` formats nothing, so the
  filter's own work is what differs).

Run: ``source .ci/postgres.sh && python bench/bench_reliability.py`` (the PostgreSQL
part is skipped without ``NAVI_TEST_POSTGRES_DSN``).
"""

from __future__ import annotations

import logging
import os
import statistics
import time
import uuid

from navi_core._logs import SecretFilter
from navi_core.conversation import UserMessage

ROUNDS = 7
WRITES = 200
RECORDS = 20_000


def _median_ms(samples: list[float]) -> float:
    return statistics.median(samples) * 1000


def bench_fence(dsn: str) -> None:
    import psycopg
    from psycopg.conninfo import make_conninfo

    from navi_core.store.postgres import PostgresStore

    schema = f"navi_b_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        scoped = make_conninfo(dsn, options=f"-c search_path={schema}")
        with PostgresStore(scoped, max_size=2) as store:
            fenced, open_ = store.create().id, store.create().id
            lock = store.lock(fenced)
            message = [UserMessage("a short prompt")]
            times: dict[str, list[float]] = {"fenced": [], "unfenced": []}
            for _ in range(ROUNDS):
                for name, sid in (("fenced", fenced), ("unfenced", open_)):
                    t0 = time.perf_counter()
                    for _ in range(WRITES):
                        store.append(sid, message)
                    times[name].append((time.perf_counter() - t0) / WRITES)
            lock.release()
    finally:
        with psycopg.connect(dsn, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    f, u = _median_ms(times["fenced"]), _median_ms(times["unfenced"])
    print(f"postgres append, fenced    {f:7.3f} ms/write")
    print(f"postgres append, unfenced  {u:7.3f} ms/write")
    print(f"fenced / unfenced          {f / u:7.2f}x")


def bench_filter() -> None:
    plain = logging.getLogger("bench.plain")
    filtered = logging.getLogger("bench.filtered")
    secret_filter = SecretFilter()
    secret_filter.add([f"sk-{i:04d}-0123456789abcdef" for i in range(4)])
    filtered.addFilter(secret_filter)
    for logger in (plain, filtered):
        logger.propagate = False
        logger.addHandler(logging.NullHandler())
        logger.setLevel(logging.INFO)
    url = "http://127.0.0.1:8080/v1/chat/completions?api-version=2024-10-21"
    times: dict[str, list[float]] = {"filtered": [], "plain": []}
    for _ in range(ROUNDS):
        for name, logger in (("plain", plain), ("filtered", filtered)):
            t0 = time.perf_counter()
            for _ in range(RECORDS):
                logger.info('HTTP Request: %s %s "%s"', "POST", url, "HTTP/1.1 200 OK")
            times[name].append((time.perf_counter() - t0) / RECORDS)
    f, p = _median_ms(times["filtered"]), _median_ms(times["plain"])
    print(f"log record, filtered       {f * 1000:7.2f} us/record")
    print(f"log record, plain          {p * 1000:7.2f} us/record")
    print(f"filtered / plain           {f / p:7.2f}x")


def main() -> None:
    dsn = os.environ.get("NAVI_TEST_POSTGRES_DSN")
    if dsn:
        bench_fence(dsn)
    else:
        print("postgres: skipped (NAVI_TEST_POSTGRES_DSN is not set)")
    bench_filter()


if __name__ == "__main__":
    main()
