"""A tiny llama-architecture GGUF model, written at test time, for llama.cpp's server.

Random weights (seeded), a byte-level GPT-2 BPE vocabulary (the 256 byte tokens, a few
merges learnt from a fixed text, ChatML's special tokens) and a ChatML chat template
with Hermes-style ``<tool_call>`` blocks, so ``llama-server --jinja`` serves
``/v1/chat/completions`` with tools. About 0.5 MB; nothing is downloaded.

    python tests/llama_model.py out.gguf      # writes the model, prints its size
"""

from __future__ import annotations

import itertools
import sys
from pathlib import Path

import gguf
import numpy as np
import numpy.typing as npt

__all__ = ["CHAT_TEMPLATE", "SPECIAL_TOKENS", "write_model"]

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
    context_length: int = 2048,
    n_embd: int = 64,
    n_layer: int = 2,
    n_head: int = 4,
    n_head_kv: int = 2,
    n_ff: int = 128,
    n_merges: int = 64,
) -> Path:
    """Write the model to ``path`` and return it; the same seed gives the same bytes.

    The output layer favours printable ASCII and the merged tokens over the other
    bytes (through one embedding dimension that every token carries), so a reply is
    mostly readable text; the control tokens are as unlikely as the rest.
    """
    rng = np.random.default_rng(seed)
    table = _byte_chars()
    merges = _merges(n_merges)
    tokens = [*table, *(a + b for a, b in merges), *SPECIAL_TOKENS]
    n_vocab = len(tokens)
    normal, control = int(gguf.TokenType.NORMAL), int(gguf.TokenType.CONTROL)
    types = [normal] * (n_vocab - len(SPECIAL_TOKENS)) + [control] * len(SPECIAL_TOKENS)

    def weights(*shape: int, scale: float = 0.02) -> npt.NDArray[np.float32]:
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    embd = weights(n_vocab, n_embd)
    embd[:, 0] = 1.0  # a constant direction the output layer reads as a bias
    output = weights(n_vocab, n_embd, scale=0.5)
    readable = [ord(" ") <= b <= ord("~") for b in range(256)] + [True] * len(merges)
    output[:, 0] = [0.5 if r else -1.0 for r in readable] + [-1.0] * len(SPECIAL_TOKENS)

    writer = gguf.GGUFWriter(str(path), "llama")
    writer.add_name("navi-tiny-llama")
    writer.add_context_length(context_length)
    writer.add_embedding_length(n_embd)
    writer.add_block_count(n_layer)
    writer.add_feed_forward_length(n_ff)
    writer.add_head_count(n_head)
    writer.add_head_count_kv(n_head_kv)
    writer.add_rope_dimension_count(n_embd // n_head)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_vocab_size(n_vocab)
    writer.add_file_type(gguf.LlamaFileType.ALL_F32)
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("gpt-2")
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_token_merges([f"{a} {b}" for a, b in merges])
    bos, _, eos = (n_vocab - len(SPECIAL_TOKENS) + i for i in range(3))
    writer.add_bos_token_id(bos)
    writer.add_eos_token_id(eos)
    writer.add_add_bos_token(False)
    writer.add_chat_template(CHAT_TEMPLATE)

    kv_dim = n_embd // n_head * n_head_kv
    writer.add_tensor("token_embd.weight", embd)
    for i in range(n_layer):
        blk = f"blk.{i}"
        writer.add_tensor(f"{blk}.attn_norm.weight", np.ones(n_embd, np.float32))
        writer.add_tensor(f"{blk}.attn_q.weight", weights(n_embd, n_embd))
        writer.add_tensor(f"{blk}.attn_k.weight", weights(kv_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_v.weight", weights(kv_dim, n_embd))
        writer.add_tensor(f"{blk}.attn_output.weight", weights(n_embd, n_embd))
        writer.add_tensor(f"{blk}.ffn_norm.weight", np.ones(n_embd, np.float32))
        writer.add_tensor(f"{blk}.ffn_gate.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_up.weight", weights(n_ff, n_embd))
        writer.add_tensor(f"{blk}.ffn_down.weight", weights(n_embd, n_ff))
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
