"""Seeded, realistic provider stream bodies for the core benchmarks.

Each generator returns the exact bytes a server sends, shaped after the recordings in
tests/data/sse (key order, separators, ids, the usage chunk, ``[DONE]``), so every
implementation under test reads the same realistic input.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator
from typing import Any

__all__ = [
    "anthropic_mixed",
    "network_chunks",
    "openai_text",
    "openai_tool_calls",
    "payloads",
    "responses_mixed",
]

_WORDS = [
    "the",
    "of",
    "and",
    "to",
    "in",
    "is",
    "that",
    "for",
    "it",
    "as",
    "with",
    "was",
    "on",
    "be",
    "by",
    "this",
    "are",
    "from",
    "or",
    "at",
    "an",
    "model",
    "stream",
    "token",
    "request",
    "response",
    "error",
    "value",
    "function",
    "return",
    "data",
    "Python",
    "résumé",
    "naïve",
    "über",
    "東京",
    "数据",
    "✓",
    "—",
    "“quoted”",
    "can't",
    "won't",
    "it's",
    "e.g.",
    "42",
    "3.14",
    "100%",
]
_PUNCT = (" ", " ", " ", " ", ", ", ". ", ".\n\n", "\n", ": ", "; ", "! ", "? ")


def _dumps(obj: Any) -> str:
    return json.dumps(obj, ensure_ascii=False, separators=(",", ":"))


def _tokens(rng: random.Random, n: int) -> Iterator[str]:
    """Token-sized text pieces: a word, often with its leading space or punctuation."""
    for _ in range(n):
        word = rng.choice(_WORDS)
        if rng.random() < 0.15:
            word = word.capitalize()
        yield rng.choice(_PUNCT) + word if rng.random() < 0.8 else word


def _openai_sse(chunks: list[dict[str, Any]]) -> bytes:
    body = "".join(f"data: {_dumps(c)}\n\n" for c in chunks) + "data: [DONE]\n\n"
    return body.encode()


def _openai_envelope(rng: random.Random) -> dict[str, Any]:
    return {
        "id": "chatcmpl-"
        + "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij0123456789", k=29)),
        "object": "chat.completion.chunk",
        "created": 1727346168 + rng.randrange(10**6),
        "model": "gpt-4o-2024-08-06",
        "system_fingerprint": "fp_" + "".join(rng.choices("0123456789abcdef", k=10)),
    }


def _choice(delta: dict[str, Any], finish: str | None = None) -> list[dict[str, Any]]:
    return [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}]


def _usage(prompt: int, completion: int) -> dict[str, Any]:
    return {
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
        "prompt_tokens_details": {"cached_tokens": 0, "audio_tokens": 0},
        "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
    }


def openai_text(n: int = 20_000, seed: int = 1) -> bytes:
    """A chat-completions text answer of ``n`` content chunks, usage, then [DONE]."""
    rng = random.Random(seed)
    env = _openai_envelope(rng)
    chunks = [
        {
            **env,
            "choices": _choice({"role": "assistant", "content": "", "refusal": None}),
        }
    ]
    chunks += [{**env, "choices": _choice({"content": t})} for t in _tokens(rng, n)]
    chunks.append({**env, "choices": _choice({}, "stop")})
    chunks.append({**env, "choices": [], "usage": _usage(1200, n)})
    return _openai_sse(chunks)


def openai_tool_calls(n: int = 20_000, calls: int = 4, seed: int = 2) -> bytes:
    """Parallel tool calls whose JSON arguments arrive in small fragments."""
    rng = random.Random(seed)
    env = _openai_envelope(rng)
    chunks = [{**env, "choices": _choice({"role": "assistant", "content": None})}]
    per_call = n // calls
    for index in range(calls):
        args = _dumps(
            {
                "path": f"src/module_{index}.py",
                "query": " ".join(_tokens(rng, per_call)),
            }
        )
        call = {
            "index": index,
            "id": "call_"
            + "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=24)),
            "type": "function",
            "function": {"name": f"search_files_{index}", "arguments": ""},
        }
        chunks.append({**env, "choices": _choice({"tool_calls": [call]})})
        pos = 0
        while pos < len(args):
            step = rng.randint(2, 9)
            piece = {"index": index, "function": {"arguments": args[pos : pos + step]}}
            chunks.append({**env, "choices": _choice({"tool_calls": [piece]})})
            pos += step
    chunks.append({**env, "choices": _choice({}, "tool_calls")})
    chunks.append({**env, "choices": [], "usage": _usage(2400, n)})
    return _openai_sse(chunks)


def _anthropic_event(obj: dict[str, Any]) -> str:
    return f"event: {obj['type']}\ndata: {_dumps(obj)}\n\n"


def anthropic_mixed(n: int = 20_000, seed: int = 3) -> bytes:
    """A Messages stream: thinking with a signature, text, then a tool_use block."""
    rng = random.Random(seed)
    usage = {
        "input_tokens": 2100,
        "cache_creation_input_tokens": 0,
        "cache_read_input_tokens": 1800,
        "output_tokens": 1,
        "service_tier": "standard",
    }
    message = {
        "id": "msg_01"
        + "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghij0123456789", k=22)),
        "type": "message",
        "role": "assistant",
        "model": "claude-sonnet-4-20250514",
        "content": [],
        "stop_reason": None,
        "stop_sequence": None,
        "usage": usage,
    }
    out = [_anthropic_event({"type": "message_start", "message": message})]

    def block(
        index: int,
        content: dict[str, Any],
        kind: str,
        field: str,
        pieces: Iterator[str],
    ) -> None:
        out.append(
            _anthropic_event(
                {
                    "type": "content_block_start",
                    "index": index,
                    "content_block": content,
                }
            )
        )
        for i, piece in enumerate(pieces):
            delta = {"type": kind, field: piece}
            out.append(
                _anthropic_event(
                    {"type": "content_block_delta", "index": index, "delta": delta}
                )
            )
            if i % 500 == 499:
                out.append(_anthropic_event({"type": "ping"}))
        if kind == "thinking_delta":
            sig = {
                "type": "signature_delta",
                "signature": "Eq"
                + "".join(
                    rng.choices(
                        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
                        k=340,
                    )
                ),
            }
            out.append(
                _anthropic_event(
                    {"type": "content_block_delta", "index": index, "delta": sig}
                )
            )
        out.append(_anthropic_event({"type": "content_block_stop", "index": index}))

    third = n // 3
    block(
        0,
        {"type": "thinking", "thinking": "", "signature": ""},
        "thinking_delta",
        "thinking",
        _tokens(rng, third),
    )
    block(1, {"type": "text", "text": ""}, "text_delta", "text", _tokens(rng, third))
    args = _dumps(
        {"path": "notes/summary.md", "content": " ".join(_tokens(rng, third // 2))}
    )
    steps = []
    pos = 0
    while pos < len(args):
        step = rng.randint(3, 12)
        steps.append(args[pos : pos + step])
        pos += step
    tool = {
        "type": "tool_use",
        "id": "toolu_01"
        + "".join(rng.choices("ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789", k=22)),
        "name": "write_file",
        "input": {},
    }
    block(2, tool, "input_json_delta", "partial_json", iter(["", *steps]))
    out.append(
        _anthropic_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use", "stop_sequence": None},
                "usage": {"output_tokens": n},
            }
        )
    )
    out.append(_anthropic_event({"type": "message_stop"}))
    return "".join(out).encode()


def responses_mixed(n: int = 20_000, seed: int = 4) -> bytes:
    """A Responses stream shaped after tests/data/sse/openai-responses: a reasoning
    item (summary deltas, encrypted content), a message of text deltas, then two
    function calls whose arguments arrive in fragments; ``n`` deltas in all (15%
    reasoning, 70% text, 15% arguments), each event named and numbered."""
    rng = random.Random(seed)
    seq = iter(range(10**9))
    out: list[str] = []

    def ev(kind: str, **fields: Any) -> None:
        obj = {"type": kind, "sequence_number": next(seq), **fields}
        out.append(f"event: {kind}\ndata: {_dumps(obj)}\n\n")

    def ident(prefix: str) -> str:
        return prefix + "".join(rng.choices("0123456789abcdef", k=50))

    def obfuscation() -> str:
        return "".join(
            rng.choices("ABCDEFGHIJKLMNabcdefghijklmn0123456789", k=rng.randint(3, 15))
        )

    response = {"id": ident("resp_"), "object": "response", "created_at": 1765552659,
                "status": "in_progress", "model": "gpt-5.1-codex-max", "output": [],
                "store": False, "usage": None}  # fmt: skip
    ev("response.created", response=response)
    ev("response.in_progress", response=response)
    rs = ident("rs_")
    ev("response.output_item.added", output_index=0,
       item={"id": rs, "type": "reasoning", "encrypted_content": "gAAAA" + "x" * 900, "summary": []})  # fmt: skip
    for piece in _tokens(rng, n * 15 // 100):
        ev("response.reasoning_summary_text.delta", item_id=rs, output_index=0,
           summary_index=0, delta=piece, obfuscation=obfuscation())  # fmt: skip
    ev("response.output_item.done", output_index=0,
       item={"id": rs, "type": "reasoning", "encrypted_content": "gAAAA" + "y" * 1200, "summary": []})  # fmt: skip
    msg = ident("msg_")
    ev("response.output_item.added", output_index=1,
       item={"id": msg, "type": "message", "status": "in_progress", "content": [], "role": "assistant"})  # fmt: skip
    for piece in _tokens(rng, n * 70 // 100):
        ev("response.output_text.delta", item_id=msg, output_index=1, content_index=0,
           delta=piece, logprobs=[], obfuscation=obfuscation())  # fmt: skip
    ev(
        "response.output_text.done",
        item_id=msg,
        output_index=1,
        content_index=0,
        text="...",
    )
    for index in (2, 3):
        fc = ident("fc_")
        ev("response.output_item.added", output_index=index,
           item={"id": fc, "type": "function_call", "status": "in_progress",
                 "arguments": "", "call_id": ident("call_")[:29], "name": "write_file"})  # fmt: skip
        ev("response.function_call_arguments.delta", item_id=fc, output_index=index,
           delta='{"path":"notes.md","text":"', obfuscation=obfuscation())  # fmt: skip
        for piece in _tokens(rng, n * 15 // 200):
            ev("response.function_call_arguments.delta", item_id=fc, output_index=index,
               delta=_dumps(piece)[1:-1], obfuscation=obfuscation())  # fmt: skip
        ev("response.function_call_arguments.delta", item_id=fc, output_index=index,
           delta='"}', obfuscation=obfuscation())  # fmt: skip
    usage = {"input_tokens": 1200, "input_tokens_details": {"cached_tokens": 1024},
             "output_tokens": n, "output_tokens_details": {"reasoning_tokens": n // 7},
             "total_tokens": 1200 + n}  # fmt: skip
    ev(
        "response.completed",
        response={**response, "status": "completed", "usage": usage},
    )
    return "".join(out).encode()


def network_chunks(
    body: bytes, seed: int = 7, low: int = 1024, high: int = 16 * 1024
) -> list[bytes]:
    """Split ``body`` the way a socket hands it over: seeded sizes in [low, high]."""
    rng = random.Random(seed)
    out = []
    pos = 0
    while pos < len(body):
        size = rng.randint(low, high)
        out.append(body[pos : pos + size])
        pos += size
    return out


def payloads(body: bytes) -> list[bytes]:
    """The ``data:`` payloads of an LF-framed body, already framed (no [DONE])."""
    return [
        line[6:]
        for line in body.split(b"\n")
        if line.startswith(b"data: ") and line != b"data: [DONE]"
    ]
