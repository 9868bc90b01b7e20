"""A loopback HTTP/1.1 server for benchmarks, meant to run in its own process.

It answers every POST with one pre-built response body chosen by path
(``/v1/chat/completions``: an OpenAI stream; ``/v1/messages``: an Anthropic stream),
sent with chunked transfer encoding in large writes, so the client under test does
not share a GIL with the server and the server costs as little as possible.

    python bench/server.py --chunks 20000        # prints "PORT <n>" and serves
    python bench/server.py --chunks 700000 --lazy  # ~200 MB, each write built when sent
"""

from __future__ import annotations

import argparse
import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson

__all__ = ["anthropic_events", "openai_events", "serve", "spawn"]

_WRITE = 256 * 1024
_WORDS = (
    "The ",
    "quick ",
    "brown ",
    "fox ",
    "jumps ",
    "over ",
    "the ",
    "lazy ",
    "dog",
    ". ",
    "Grüße ",
    "— ",
    "naïve ",
    "🙂 ",
    '"quoted" ',
    "x\\y ",
    "\n",
)


def _text(i: int, width: int) -> str:
    if width <= 8:
        return _WORDS[i % len(_WORDS)]
    unit = _WORDS[i % len(_WORDS)]
    return (unit * (width // len(unit) + 1))[:width]


def openai_events(count: int, width: int = 0) -> Iterator[bytes]:
    """A chat-completions stream of ``count`` text chunks as gpt-4o writes them."""
    head = (
        b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk",'
        b'"created":1741569952,"model":"gpt-4o-2024-08-06","service_tier":"default",'
        b'"system_fingerprint":"fp_f9f4fb6dbf","choices":[{"index":0,"delta":'
    )
    tail = b',"logprobs":null,"finish_reason":null}]}\n\n'
    yield head + b'{"role":"assistant","content":"","refusal":null}' + tail
    for i in range(count):
        yield head + orjson.dumps({"content": _text(i, width)}) + tail
    yield head + b'{},"logprobs":null,"finish_reason":"stop"}]}\n\n'
    yield (
        b'data: {"id":"chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT","object":"chat.completion.chunk",'
        b'"created":1741569952,"model":"gpt-4o-2024-08-06","choices":[],"usage":{"prompt_tokens":19,'
        b'"completion_tokens":%d,"total_tokens":%d,"prompt_tokens_details":{"cached_tokens":0},'
        b'"completion_tokens_details":{"reasoning_tokens":0}}}\n\n'
        % (count, count + 19)
    )
    yield b"data: [DONE]\n\n"


def anthropic_events(count: int, width: int = 0) -> Iterator[bytes]:
    """A Messages stream of ``count`` text deltas as claude-sonnet-4 writes them."""
    yield (
        b'event: message_start\ndata: {"type":"message_start","message":{"id":"msg_01XFDUDYJgAACzvnptvVoYEL",'
        b'"type":"message","role":"assistant","model":"claude-sonnet-4-20250514","content":[],'
        b'"stop_reason":null,"stop_sequence":null,"usage":{"input_tokens":25,"cache_creation_input_tokens":0,'
        b'"cache_read_input_tokens":0,"output_tokens":1}}}\n\n'
    )
    yield (
        b'event: content_block_start\ndata: {"type":"content_block_start","index":0,'
        b'"content_block":{"type":"text","text":""}}\n\n'
    )
    yield b'event: ping\ndata: {"type": "ping"}\n\n'
    head = b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":'
    for i in range(count):
        yield head + orjson.dumps(_text(i, width)) + b"}}\n\n"
    yield b'event: content_block_stop\ndata: {"type":"content_block_stop","index":0}\n\n'
    yield (
        b'event: message_delta\ndata: {"type":"message_delta","delta":{"stop_reason":"end_turn",'
        b'"stop_sequence":null},"usage":{"output_tokens":%d}}\n\n' % count
    )
    yield b'event: message_stop\ndata: {"type":"message_stop"}\n\n'


def _chunked(events: Iterator[bytes]) -> Iterator[bytes]:
    """Group events into writes of about ``_WRITE`` bytes, each one HTTP chunk."""
    pending: list[bytes] = []
    size = 0
    for event in events:
        pending.append(event)
        size += len(event)
        if size >= _WRITE:
            yield b"%x\r\n%b\r\n" % (size, b"".join(pending))
            pending, size = [], 0
    if pending:
        yield b"%x\r\n%b\r\n" % (size, b"".join(pending))
    yield b"0\r\n\r\n"


_HEAD = (
    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
    b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n"
)


def serve(bodies: dict[str, Callable[[], Iterator[bytes]]], port: int = 0) -> None:
    """Serve forever; ``bodies`` maps a path to a function giving the body's writes."""
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", port))
    listener.listen(64)
    print(f"PORT {listener.getsockname()[1]}", flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_connection, args=(conn, bodies), daemon=True).start()


def _connection(
    conn: socket.socket, bodies: dict[str, Callable[[], Iterator[bytes]]]
) -> None:
    conn.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 * 1024 * 1024)
    # the head and a small body go out at once, not after the client's delayed ACK
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    buf = b""
    try:
        while True:
            while b"\r\n\r\n" not in buf:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            head, _, buf = buf.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            path = lines[0].split(" ")[1]
            length = 0
            for line in lines[1:]:
                name, _, value = line.partition(":")
                if name.strip().lower() == "content-length":
                    length = int(value)
            while len(buf) < length:
                data = conn.recv(65536)
                if not data:
                    return
                buf += data
            buf = buf[length:]
            body = bodies.get(path.split("?")[0])
            if body is None:
                conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                continue
            conn.sendall(_HEAD)
            for piece in body():
                conn.sendall(piece)
    except OSError:
        return
    finally:
        conn.close()


@contextlib.contextmanager
def spawn(
    chunks: int, *, lazy: bool = False, cpus: set[int] | None = None
) -> Iterator[str]:
    """Start this server in a child process (a benchmark's client side), on ``cpus``
    if given (its connection threads, made later, inherit them); yield its base URL,
    and stop it on the way out."""
    cmd = [sys.executable, str(Path(__file__).resolve()), "--chunks", str(chunks)]
    proc = subprocess.Popen(
        [*cmd, "--lazy"] if lazy else cmd, stdout=subprocess.PIPE, text=True
    )
    if cpus is not None:
        os.sched_setaffinity(proc.pid, cpus)
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        if not line.startswith("PORT "):
            raise RuntimeError(f"bench server did not start: {line!r}")
        yield f"http://127.0.0.1:{int(line.split()[1])}"
    finally:
        proc.terminate()
        proc.wait(timeout=10)
        if proc.stdout is not None:
            proc.stdout.close()


def _main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--chunks", type=int, default=20_000, help="text chunks per response"
    )
    parser.add_argument(
        "--width", type=int, default=0, help="characters per chunk (0: words)"
    )
    parser.add_argument(
        "--lazy", action="store_true", help="build writes as they are sent"
    )
    parser.add_argument("--port", type=int, default=0)
    args = parser.parse_args()
    chunks, width = args.chunks, args.width
    if args.lazy:  # large bodies: build each write when it is sent
        bodies = {
            "/v1/chat/completions": lambda: _chunked(openai_events(chunks, width)),
            "/v1/messages": lambda: _chunked(anthropic_events(chunks, width)),
        }
    else:  # pre-built bytes, reused for every request
        openai = list(_chunked(openai_events(chunks, width)))
        anthropic = list(_chunked(anthropic_events(chunks, width)))
        bodies = {
            "/v1/chat/completions": lambda: iter(openai),
            "/v1/messages": lambda: iter(anthropic),
        }
    try:
        serve(bodies, args.port)
    except KeyboardInterrupt:
        sys.exit(0)


if __name__ == "__main__":
    _main()
