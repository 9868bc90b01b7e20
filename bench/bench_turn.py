"""The client CPU of one whole tool turn, against a raw socket + orjson floor.

A loopback server (its own process) answers ``add(a=1, b=2)`` twice, then a 500-word
answer, over OpenAI-compatible chat completions: three requests per turn. Two framings
are measured, each its own table: chunked transfer encoding with one chunk per event
(as uvicorn-served model servers such as vLLM send them), and one body sized by
``content-length``. In one process, rounds visit each contender in a rotated order;
each runs a batch of turns and its CPU time (``time.process_time``: every thread of
the process) per turn is taken. Contenders:

- ``navi_core``: ``Agent(OpenAIChat(...), tools=[add]).run(prompt)``, a new agent per
  turn, every event pulled with ``next()``;
- ``navi_core, inline tool``: the same with ``@tool(inline=True)`` (no thread hand-off);
- ``navi_core over httpx``: the same with ``client=httpx.Client()``, so the requests
  go through httpx instead of navi_core's own plain-HTTP/1.1 client;
- ``httpx + httpx-sse + orjson``: a hand-written loop, the usual way to stream chat
  completions without an SDK (when ``httpx-sse`` is installed);
- ``socket + orjson`` (the floor): a raw socket writing the same requests, the
  simplest loop removing the chunked coding, and orjson reading the same events, with
  nothing else.

Every turn is checked (two tool results, the whole answer). Printed: median CPU ms per
turn and the median of per-round ratios to the floor. Goals: ``navi_core`` at most
1.2x the floor, and the httpx-sse loop at least 3x ``navi_core``. A third table, with
no goal, has the same turn end in a 20-word answer (one sized body): there the cost
that does not grow with the answer (the agent, the turn, three requests, two tool
calls) is most of each contender's.

    python bench/bench_turn.py              # 9 rounds of ~0.4 s batches
    python bench/bench_turn.py --rounds 15
"""

from __future__ import annotations

import argparse
import socket
import statistics
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import _record
import orjson
from bench_memory import PROMPT, SYSTEM, WORDS, requests, serving

FLOOR_GOAL = 1.2
LOOP_GOAL = 3.0
ANSWER = "".join(WORDS)
SHORT = 20  # words of the third table's answer
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "add",
            "description": "Add two integers.",
            "parameters": {
                "type": "object",
                "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
                "required": ["a", "b"],
            },
        },
    }
]


# -- the server (its own process) ----------------------------------------------------

#: every event carries what a real server's chunks carry (a recorded gpt-4o stream's
#: fields), so parsing costs what it costs against one
_ENVELOPE = {
    "id": "chatcmpl-B9MBs8CjcvOU2jLn4n570S5qMJKcT",
    "object": "chat.completion.chunk",
    "created": 1741569952,
    "model": "gpt-4o-2024-08-06",
    "service_tier": "default",
    "system_fingerprint": "fp_f9f4fb6dbf",
}


def _event(delta: dict[str, Any], finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}
    return b"data: " + orjson.dumps({**_ENVELOPE, "choices": [choice]}) + b"\n\n"


def _reply(request: dict[str, Any], words: list[str]) -> bytes:
    """``add(a=1, b=2)`` until two results came back, then an answer of ``words``;
    a usage event last when the request asks for one, as OpenAI's API sends it."""
    calls = sum(1 for m in request["messages"] if m["role"] == "tool")
    if calls < 2:
        call = {
            "index": 0,
            "id": f"call_{calls + 1}",
            "type": "function",
            "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'},
        }
        events = [
            _event({"role": "assistant", "content": None, "tool_calls": [call]}),
            _event({}, "tool_calls"),
        ]
    else:
        events = [_event({"role": "assistant", "content": ""})]
        events += [_event({"content": w}) for w in words]
        events.append(_event({}, "stop"))
    if (request.get("stream_options") or {}).get("include_usage"):
        usage = {"prompt_tokens": 120, "completion_tokens": len(events) - 1}
        usage["total_tokens"] = usage["prompt_tokens"] + usage["completion_tokens"]
        usage_event = {**_ENVELOPE, "choices": [], "usage": usage}
        events.append(b"data: " + orjson.dumps(usage_event) + b"\n\n")
    return b"".join(events) + b"data: [DONE]\n\n"


def _chunked(payload: bytes) -> bytes:
    events = [e + b"\n\n" for e in payload.split(b"\n\n") if e]
    return b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in events) + b"0\r\n\r\n"


def _connection(conn: socket.socket) -> None:
    with conn:
        for line, body in requests(conn):
            words = WORDS[:SHORT] if b" /short/" in line else WORDS
            payload = _reply(orjson.loads(body), words)
            if b" /chunked/" in line:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n" + _chunked(payload)
                )
            else:
                conn.sendall(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"content-length: %d\r\n\r\n" % len(payload) + payload
                )


def serve() -> None:
    listener = socket.create_server(("127.0.0.1", 0))
    print("PORT", listener.getsockname()[1], flush=True)
    while True:
        conn, _ = listener.accept()
        threading.Thread(target=_connection, args=(conn,), daemon=True).start()


# -- the contenders: each returns turn() -> (tool results, answer text) ---------------


def _add(a: int, b: int) -> str:
    return f"RZQ17 {a + b}"


def navi(
    url: str, *, inline: bool = False, over_httpx: bool = False
) -> Callable[[], Any]:
    import httpx

    from navi_core import Agent, OpenAIChat, TextDelta, ToolFinished, tool

    @tool(inline=inline)
    def add(a: int, b: int) -> str:
        """Add two integers.

        Args:
            a: first.
            b: second.
        """
        return _add(a, b)

    client = httpx.Client() if over_httpx else None
    provider = OpenAIChat(model="m", base_url=url, api_key="x", client=client)

    def turn() -> tuple[int, str]:
        agent = Agent(provider, tools=[add], system=SYSTEM)
        stream = agent.run(PROMPT)
        parts, tools = [], 0
        while ev := stream.next():
            kind = type(ev)
            if kind is TextDelta:
                parts.append(ev.text)
            elif kind is ToolFinished:
                tools += 1
        agent.close()
        return tools, "".join(parts)

    return turn


def _dict_turn(
    stream_events: Callable[[list[dict[str, Any]]], Any],
) -> Callable[[], Any]:
    """A hand loop over chat completions: ``stream_events(messages)`` yields each
    event's parsed JSON."""

    def turn() -> tuple[int, str]:
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": SYSTEM},
            {"role": "user", "content": PROMPT},
        ]
        tools = 0
        while True:
            text: list[str] = []
            calls: dict[int, dict[str, Any]] = {}
            usage: dict[str, int] = {}
            for event in stream_events(messages):
                if not (choices := event["choices"]):  # the usage event
                    usage = event["usage"]
                    continue
                delta = choices[0]["delta"]
                if content := delta.get("content"):
                    text.append(content)
                for call in delta.get("tool_calls") or ():
                    slot = calls.setdefault(call["index"], {"args": []})
                    if "id" in call:
                        slot["id"] = call["id"]
                    function = call.get("function", {})
                    if "name" in function:
                        slot["name"] = function["name"]
                    slot["args"].append(function.get("arguments", ""))
            assert usage["completion_tokens"] > 0
            if not calls:
                return tools, "".join(text)
            uses = [
                {
                    "id": c["id"],
                    "type": "function",
                    "function": {"name": c["name"], "arguments": "".join(c["args"])},
                }
                for c in calls.values()
            ]
            messages.append({"role": "assistant", "content": None, "tool_calls": uses})
            for use in uses:
                args = orjson.loads(use["function"]["arguments"])
                result = _add(**args)
                tools += 1
                messages.append(
                    {"role": "tool", "tool_call_id": use["id"], "content": result}
                )

    return turn


def _body(messages: list[dict[str, Any]]) -> bytes:
    return orjson.dumps(
        {
            "model": "m",
            "stream": True,
            "stream_options": {"include_usage": True},
            "messages": messages,
            "tools": TOOLS,
        }
    )


def httpx_sse(url: str) -> Callable[[], Any] | None:
    try:
        from httpx_sse import connect_sse
    except ImportError:
        return None
    import httpx

    client = httpx.Client()
    headers = {"authorization": "Bearer x", "content-type": "application/json"}

    def events(messages: list[dict[str, Any]]) -> Any:
        with connect_sse(
            client, "POST", url + "/chat/completions", content=_body(messages),
            headers=headers,
        ) as source:  # fmt: skip
            for sse in source.iter_sse():
                if sse.data == "[DONE]":
                    break
                yield orjson.loads(sse.data)

    return _dict_turn(events)


def _dechunked(buf: bytes) -> tuple[bytes, bytes, bool]:
    """The data of the whole chunks at the start of ``buf``, the rest, and whether
    the last chunk came (the least a streaming client does with chunked coding)."""
    out, pos = [], 0
    while (eol := buf.find(b"\r\n", pos)) >= 0:
        size = int(buf[pos:eol], 16)
        if not size:
            return b"".join(out), b"", True
        if eol + 4 + size > len(buf):
            break
        out.append(buf[eol + 2 : eol + 2 + size])
        pos = eol + 4 + size
    return b"".join(out), buf[pos:], False


def floor(url: str) -> Callable[[], Any]:
    host, _, port = url.removeprefix("http://").partition("/")[0].partition(":")
    sock = socket.create_connection((host, int(port)))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    path = "/" + url.removeprefix("http://").partition("/")[2]
    head = (
        f"POST {path}/chat/completions HTTP/1.1\r\nhost: {host}:{port}\r\n"
        "authorization: Bearer x\r\ncontent-type: application/json\r\n"
    ).encode()

    def events(messages: list[dict[str, Any]]) -> Any:
        """Each event's JSON as soon as its read came in."""
        body = _body(messages)
        sock.sendall(head + b"content-length: %d\r\n\r\n" % len(body) + body)
        data = sock.recv(65536)
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        top, _, raw = data.partition(b"\r\n\r\n")
        chunked = b"chunked" in top
        left = 0 if chunked else int(top.split(b"content-length: ")[1].split(b"\r")[0])
        line = b""
        while True:
            if chunked:
                piece, raw, done = _dechunked(raw)
            else:
                piece, raw, left = raw, b"", left - len(raw)
                done = left <= 0
            lines = (line + piece).split(b"\n")
            line = lines.pop()
            for full in lines:
                if full.startswith(b"data: {"):
                    yield orjson.loads(full[6:])
            if done:
                return
            raw += sock.recv(65536)

    return _dict_turn(events)


CONTENDERS: dict[str, Callable[[str], Callable[[], Any] | None]] = {
    "navi_core": navi,
    "navi_core, inline tool": lambda url: navi(url, inline=True),
    "navi_core over httpx": lambda url: navi(url, over_httpx=True),
    "httpx + httpx-sse + orjson": httpx_sse,
    "socket + orjson (floor)": floor,
}
FLOOR = "socket + orjson (floor)"


def _batch(turn: Callable[[], Any], count: int, answer: str) -> float:
    start = time.process_time()
    for _ in range(count):
        tools, text = turn()
        assert tools == 2 and text == answer, (tools, text[:80])
    return (time.process_time() - start) / count


#: table -> (the server's path, the answer's words, whether the goals apply)
FRAMINGS = {
    "one chunk per event": ("/chunked/v1", WORDS, True),
    "one sized body": ("/v1", WORDS, True),
    f"a {SHORT}-word answer, one sized body": ("/short/v1", WORDS[:SHORT], False),
}


def _measure(root: str, framing: str, rounds: int, batch_s: float) -> None:
    """Every contender against the server's path for ``framing``: print and record
    the table and, for the 500-word answer, the goals."""
    path, words, goals = FRAMINGS[framing]
    url, answer = root + path, "".join(words)
    turns = {}
    for name, make in CONTENDERS.items():
        turn = make(url)
        if turn is None:
            print(f"  {name}: not installed, skipped")
            continue
        for _ in range(20):
            turn()
        count = max(5, int(batch_s / max(_batch(turn, 10, answer), 1e-5)))
        turns[name] = (turn, count)
    names = list(turns)
    cpu: dict[str, list[float]] = {name: [] for name in names}
    for r in range(rounds):
        order = names[r % len(names) :] + names[: r % len(names)]
        seen = {name: _batch(*turns[name], answer) for name in order}
        for name in names:
            cpu[name].append(seen[name])

    def ratio(a: str, b: str) -> float:
        """The median of the per-round ratios of ``a`` to ``b``."""
        return statistics.median(x / y for x, y in zip(cpu[a], cpu[b], strict=True))

    print(f"client CPU per tool turn, {framing} ({rounds} rounds)")
    rows: list[list[object]] = []
    for name in names:
        ms = statistics.median(cpu[name]) * 1e3
        print(f"  {name:<30} {ms:7.3f} ms  {ratio(name, FLOOR):5.2f}x floor")
        rows.append([name, f"{ms:.3f}", f"{ratio(name, FLOOR):.2f}x"])
    _record.table(
        f"Client CPU per tool turn, {framing} (median of {rounds} rounds)",
        ["contender", "CPU ms per turn", "vs socket + orjson"],
        rows,
    )
    loop = "httpx + httpx-sse + orjson"
    if not goals:
        if loop in cpu:
            print(f"the httpx-sse loop: {ratio(loop, 'navi_core'):.2f}x navi_core")
        return
    ours = ratio("navi_core", FLOOR)
    met = ours <= FLOOR_GOAL
    print(f"goal: navi_core <= {FLOOR_GOAL}x the floor: {ours:.2f}x ({_verdict(met)})")
    _record.goal(f"{framing}: navi_core <= {FLOOR_GOAL}x the floor ({ours:.2f}x)", met)
    if loop in cpu:
        lead = ratio(loop, "navi_core")
        met = lead >= LOOP_GOAL
        print(
            f"goal: the httpx-sse loop >= {LOOP_GOAL}x navi_core: {lead:.2f}x ({_verdict(met)})"
        )
        _record.goal(
            f"{framing}: the httpx-sse loop >= {LOOP_GOAL}x navi_core ({lead:.2f}x)",
            met,
        )


def _verdict(met: bool) -> str:
    return "met" if met else "missed"


def main() -> None:
    if sys.argv[1:2] == ["--serve"]:
        serve()
        return
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--batch-s", type=float, default=0.4, help="seconds per batch")
    _record.add_option(parser)
    args = parser.parse_args()
    _record.start(args)

    from navi_core.core import IMPLEMENTATION

    print(f"core: {IMPLEMENTATION}")
    with serving(__file__) as root:
        for framing in FRAMINGS:
            _measure(root, framing, args.rounds, args.batch_s)


if __name__ == "__main__":
    main()
