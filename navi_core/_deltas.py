"""Delta kinds: the compact values the core's stream parsers return; block kinds.

The one home of both kind numbers: the pure core imports them from here, and the
compiled core, which needs them as C constants, checks at import that its own equal
these (else ``ImportError``).

A delta is a tuple whose first item is one of the int kinds below. Both core
implementations (``csrc/_core.pyx`` and ``_core_py.py``) produce exactly these shapes;
``providers.assembler`` turns them into events and the finished ``Message``.

==================  ===================================================================
kind                tuple
==================  ===================================================================
TEXT                (TEXT, text)
THINKING            (THINKING, text)   ``(THINKING, "")``: opens a thinking block of its
                    own (a block with no text; its SIGNATURE follows)
SIGNATURE           (SIGNATURE, signature)   closes the current thinking block
REDACTED_THINKING   (REDACTED_THINKING, data)
TOOL_START          (TOOL_START, index, id, name)   index: ordinal of the call in the
                    response (OpenAI ``tool_calls[].index``; Anthropic: tool_use blocks
                    seen before this one)
TOOL_ARGS           (TOOL_ARGS, index, fragment)    a non-empty JSON text fragment
FINISH              (FINISH, reason)        raw ``finish_reason`` / ``stop_reason``
USAGE               (USAGE, input, output, cache_read, cache_write, reasoning)
                    normalised totals known so far; the latest one wins
MODEL               (MODEL, name)           when first seen and whenever it changes
ERROR               (ERROR, type, message)  an error object sent inside the stream
DONE                (DONE,)                 ``data: [DONE]``, ``message_stop`` or
                    ``response.completed``
REASONING_ITEM      (REASONING_ITEM, item)  a finished Responses reasoning item as JSON
                    text (``encrypted_content`` included): seals the current thinking
                    block, to be sent back to that API unchanged
==================  ===================================================================

Block kinds are the first item of each ``(kind, text, extra)`` that the core's
``Assembler.blocks()`` returns, one per block of the finished answer:

=====================  ================================================================
kind                   block
=====================  ================================================================
BLOCK_TEXT             text; extra None
BLOCK_THINKING         thinking without a signature; extra None
BLOCK_SEALED_THINKING  thinking sealed by a signature or a reasoning item; extra: it
BLOCK_REDACTED         redacted thinking; text "", extra its data
BLOCK_TOOL             a tool call; text: its arguments, extra ``(id, name)``
=====================  ================================================================
"""

from __future__ import annotations

import math
from typing import Any, Final

__all__ = [
    "BLOCK_REDACTED",
    "BLOCK_SEALED_THINKING",
    "BLOCK_TEXT",
    "BLOCK_THINKING",
    "BLOCK_TOOL",
    "DONE",
    "ERROR",
    "FINISH",
    "MODEL",
    "REASONING_ITEM",
    "REDACTED_THINKING",
    "SIGNATURE",
    "TEXT",
    "THINKING",
    "TOOL_ARGS",
    "TOOL_START",
    "USAGE",
    "token_count",
]

TEXT: Final = 0
THINKING: Final = 1
SIGNATURE: Final = 2
REDACTED_THINKING: Final = 3
TOOL_START: Final = 4
TOOL_ARGS: Final = 5
FINISH: Final = 6
USAGE: Final = 7
MODEL: Final = 8
ERROR: Final = 9
DONE: Final = 10
REASONING_ITEM: Final = 11

BLOCK_TEXT: Final = 0
BLOCK_THINKING: Final = 1
BLOCK_SEALED_THINKING: Final = 2
BLOCK_REDACTED: Final = 3
BLOCK_TOOL: Final = 4


def token_count(obj: Any, key: str, member: str | None = None) -> int:
    """``obj[key]`` (or ``obj[key][member]``) as a token count; never fails, so usage
    cannot cost a good answer.

    An int is kept; an integral float (``12.0``, as OpenRouter sends) is that integer
    and any other finite float is rounded; a negative count, a missing member, null
    or anything else (a string, a bool, NaN, a non-object) is 0.
    """
    value = obj.get(key) if type(obj) is dict else None
    if member is not None:
        value = value.get(member) if type(value) is dict else None
    if type(value) is int:
        return value if value > 0 else 0
    if type(value) is float and math.isfinite(value):
        return round(value) if value > 0 else 0
    return 0
