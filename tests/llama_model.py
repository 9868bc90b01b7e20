"""A tiny llama-architecture GGUF model, written at test time, for llama.cpp's server.

Seeded random weights, a byte-level GPT-2 BPE vocabulary (the 256 byte tokens, merges
learnt from a fixed text, Qwen-style tool tokens, ChatML's control tokens) and a ChatML
chat template with Hermes-style ``<tool_call>`` blocks, so ``llama-server --jinja``
serves ``/v1/chat/completions`` with tools. The output layer and one attention head
are set by hand so that the model calls tools on its own (``write_model``). About
0.5 MB; nothing is downloaded.

    python tests/llama_model.py out.gguf      # writes the model, prints its size
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "TOOL_TOKENS", "write_model"]

TOOL_TOKENS = ("<tool_call>", "</tool_call>", "<tool_response>")
"""Tokens of their own, as in Qwen's vocabulary (a tool call starts in one step)."""

SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")
"""Control tokens after the byte and merge tokens: BOS, turn start, EOS/turn end."""

CHAT_TEMPLATE = """\
{%- if tools %}
{{- '<|im_start|>system\\n' }}
{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}
{{- '# Tools\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}
{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}
{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{"name": <function-name>, "arguments": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}
{%- elif messages[0].role == 'system' %}
{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
{%- if message.role == 'user' or (message.role == 'system' and not loop.first) or (message.role == 'assistant' and not message.tool_calls) %}
{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}
{%- elif message.role == 'assistant' %}
{{- '<|im_start|>assistant' }}
{%- if message.content %}{{- '\\n' + message.content }}{%- endif %}
{%- for tool_call in message.tool_calls %}
{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}
{{- '\\n<tool_call>\\n{"name": "' + tool_call.name + '", "arguments": ' }}
{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}
{{- '}\\n</tool_call>' }}
{%- endfor %}
{{- '<|im_end|>\\n' }}
{%- elif message.role == 'tool' %}
{%- if loop.index0 == 0 or messages[loop.index0 - 1].role != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}
{{- '\\n<tool_response>\\n' + message.content + '\\n</tool_response>' }}
{%- if loop.last or messages[loop.index0 + 1].role != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}
{%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}
"""
"""ChatML with Hermes-style tool calls (the shape of Qwen 2.5's template)."""

_CORPUS = (
    "the quick brown fox jumps over the lazy dog. the tool returns the sum of the "
    "numbers, then the assistant replies with the final number only. add the "
    "first number to the second and call the tool again."
)


def _byte_chars() -> list[str]:
    """GPT-2's byte-to-unicode table: byte ``b`` is written as ``_byte_chars()[b]``."""
    printable = [
        *range(ord("!"), ord("~") + 1),
        *range(ord("¡"), ord("¬") + 1),
        *range(ord("®"), ord("ÿ") + 1),
    ]
    chars = {b: chr(b) for b in printable}
    extra = 0
    for b in range(256):
        if b not in chars:
            chars[b] = chr(256 + extra)
            extra += 1
    return [chars[b] for b in range(256)]


def _merges(count: int) -> list[tuple[str, str]]:
    """``count`` BPE merges learnt from ``_CORPUS``, most frequent pair first."""
    table = _byte_chars()
    words = [
        [table[b] for b in (w if i == 0 else " " + w).encode()]
        for i, w in enumerate(_CORPUS.split(" "))
    ]
    merges: list[tuple[str, str]] = []
    for _ in range(count):
        pairs: dict[tuple[str, str], int] = {}
        for word in words:
            for pair in itertools.pairwise(word):
                pairs[pair] = pairs.get(pair, 0) + 1
        if not pairs:
            break
        best = max(pairs, key=lambda p: (pairs[p], p))
        merges.append(best)
        for i, word in enumerate(words):
            out: list[str] = []
            j = 0
            while j < len(word):
                if j + 1 < len(word) and (word[j], word[j + 1]) == best:
                    out.append(word[j] + word[j + 1])
                    j += 2
                else:
                    out.append(word[j])
                    j += 1
            words[i] = out
    return merges


def write_model(
    path: Path,
    *,
    seed: int = 0,
    context_length: int = 4096,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_merges: int = 64,
) -> Path:
    """Write the model to ``path`` and return it; the same seed gives the same bytes.

    The weights are random, but the output layer is shaped so that llama-server's
    behaviour is worth testing: printable ASCII and the merged tokens are far likelier
    than the other bytes (replies are readable noise), ``<tool_call>`` comes about
    once in eight tokens (so a tool call starts on its own, and the server's grammar
    completes it) unless a tool response is in the context, then the end of turn
    comes soon; the end of turn is rare in text, almost sure right after
    ``</tool_call>`` (a response ends after its calls), never right after a newline
    (so no response is empty).
    """
    rng = np.random.default_rng(seed)
    table = _byte_chars()
    merges = _merges(n_merges)
    tokens = [*table, *(a + b for a, b in merges), *TOOL_TOKENS, *SPECIAL_TOKENS]
    n_vocab = len(tokens)
    call_start, call_end, response = (tokens.index(t) for t in TOOL_TOKENS)
    bos, eos = tokens.index("<|endoftext|>"), tokens.index("<|im_end|>")
    special_ids = [tokens.index(t) for t in SPECIAL_TOKENS]
    newline, close = table.index(_byte_chars()[10]), table.index(">")
    types = [int(gguf.TokenType.NORMAL)] * len(tokens)
    for t in (call_start, call_end, response):
        types[t] = int(gguf.TokenType.USER_DEFINED)
    for special in SPECIAL_TOKENS:
        types[tokens.index(special)] = int(gguf.TokenType.CONTROL)

    kv_dim = n_embd // n_head * n_head_kv

    def weights(*shape: int, scale: float = 0.02) -> npt.NDArray[np.float32]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    # Dimensions of the residual stream with a meaning: 0 is 1.0 in every embedding,
    # which the output layer reads as a per-token bias (logit ~ 8 x bias); 1 marks
    # the end of a tool call, 2 its start, 3 a tool response, 5 a newline (where a
    # response starts); 4 is written by one attention head that looks for a tool
    # response anywhere before.
    embd = weights(n_vocab, n_embd)
    embd[:, :6] = 0.0
    embd[:, 0] = 1.0
    embd[newline, 5] = 2.0
    embd[[call_end, close], 1] = 2.0
    embd[call_start, 2] = 2.0
    embd[response, 3] = 1.0
    output = weights(n_vocab, n_embd, scale=0.1)
    output[:, 0] = -1.0
    output[: len(table), 0] = [
        0.5 if " " <= chr(b) <= "~" else -1.0 for b in range(256)
    ]
    output[len(table) : len(table) + len(merges), 0] = 0.5
    # a call seldom has another after it, and numbers stay short where a grammar
    # lets them run on (tool-call arguments)
    output[table.index(","), 0] = 0.1
    output[[table.index(c) for c in "0123456789.eE+-"], 0] = -0.5
    output[call_start, 0] = 0.95  # about one token in eight
    output[[call_end, close], 0] = 0.1  # (they end a response)
    output[eos, 0] = 0.15  # rare in text
    output[eos, 1] = 3.0  # a response ends after its tool calls
    # a response starts after a newline: not with the end of a call, nor with a
    # token that shows no text (either would make it empty)
    output[[eos, call_end, response, *special_ids], 5] = -5.0
    output[newline, 2] = 3.0  # "<tool_call>" is followed by a newline
    output[call_start, 4] = -3.0  # after a tool response: no more calls,
    output[eos, 4] = 0.8  # and a short answer

    def attention(layer: int) -> dict[str, npt.NDArray[np.float32]]:
        head = n_embd // n_head
        q, o = weights(n_embd, n_embd), weights(n_embd, n_embd)
        k, v = weights(kv_dim, n_embd), weights(kv_dim, n_embd)
        o[1:6] = 0.0  # only head 0 below writes to the marked dimensions
        if layer == 0:
            # head 0 queries the constant dimension against the tool-response
            # marker on the slowest-turning rotary pair, so it attends to any
            # response in the context; its value carries the marker to dimension 4
            q[head - 2], k[head - 2], v[0] = 0.0, 0.0, 0.0
            q[head - 2, 0] = k[head - 2, 3] = 1.4
            v[0, 3] = 0.18
            o[4, 0] = 1.0
        return {"attn_q": q, "attn_k": k, "attn_v": v, "attn_output": o}

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("navi-tiny-llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_rope_freq_base(10000.0)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in merges])
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    writer.add_tensor("token_embd.weight", embd)
    for i in range(n_layer):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", np.ones(n_embd, np.float32))
        for name, tensor in attention(i).items():
            writer.add_tensor(f"{blk}.{name}.weight", tensor)
        writer.add_tensor(f"{blk}.ffn_norm.weight", np.ones(n_embd, np.float32))
        writer.add_tensor(f"{blk}.ffn_gate.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", weights(n_ff, n_embd))
        down = weights(n_embd, n_ff)
        down[1:6] = 0.0
        writer.add_tensor(f"{blk}.ffn_down.weight", down)
    writer.add_tensor("output_norm.weight", np.ones(n_embd, np.float32))
    writer.add_tensor("output.weight", output)

    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: python tests/llama_model.py OUT.gguf")
    out = write_model(Path(sys.argv[1]))
    print(f"{out}: {out.stat().st_size:,} bytes")
