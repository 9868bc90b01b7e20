"""Response assembly's hot half: delta tuples in, events and block text out.

Pure twin of ``csrc/_assemble.pxi``. ``providers.assembler.ResponseAssembler`` owns one
``Assembler`` per response and builds the finished ``Message`` from its ``blocks()``;
the event classes come in from the caller, so the core knows nothing of them but their
field order (``__match_args__``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Sequence
from typing import Any

# Delta kinds and block kinds; a block is [kind, pieces, extra, joined].
from ._deltas import (
    BLOCK_REDACTED as _REDACTED,
    BLOCK_SEALED_THINKING as _SEALED_THINKING,
    BLOCK_TEXT as _TEXT,
    BLOCK_THINKING as _THINKING,
    BLOCK_TOOL as _TOOL,
    DONE as _D_DONE,
    ERROR as _D_ERROR,
    FINISH as _D_FINISH,
    MODEL as _D_MODEL,
    REASONING_ITEM as _D_REASONING_ITEM,
    REDACTED_THINKING as _D_REDACTED,
    SIGNATURE as _D_SIGNATURE,
    TEXT as _D_TEXT,
    THINKING as _D_THINKING,
    TOOL_ARGS as _D_TOOL_ARGS,
    TOOL_START as _D_TOOL_START,
    USAGE as _D_USAGE,
)

__all__ = ["Assembler"]

# every _RUN new pieces of a block are joined into one: a long response arrives as
# hundreds of thousands of tiny deltas, and each str costs ~50 bytes beyond its text
_RUN = 256


class Assembler:
    """Applies delta tuples in order, pushing one event per visible delta.

    ``events`` are the classes for text, thinking, tool-call start, tool-call
    arguments and model events; ``on_error(type, message)`` returns the exception for
    an in-stream error. With ``coalesce``, adjacent deltas of one kind in one ``feed``
    call become one event (what one network read held). An empty ``THINKING`` opens
    a thinking block and pushes nothing: a parser's mark of a block with no text (an
    Anthropic signature-only block), so the signature after it seals that block.
    """

    def __init__(
        self,
        events: Sequence[type],
        on_error: Callable[[Any, Any], BaseException],
        coalesce: bool = False,
    ) -> None:
        if len(events) != 5:
            raise ValueError(
                "events must be 5 classes: text, thinking, start, args, model"
            )
        self._text, self._thinking, self._start, self._args, self._model = events
        self._on_error = on_error
        self._coalesce = bool(coalesce)
        self._blocks: list[list[Any]] = []
        self._cur: list[Any] | None = None
        self._tools: dict[int, list[Any]] = {}
        self.done = False
        self.finish_reason: str | None = None
        self.model: str | None = None
        self.usage: tuple[Any, ...] | None = None

    def feed(
        self, deltas: Sequence[tuple[Any, ...]], push: Callable[[Any], Any]
    ) -> None:
        """Apply ``deltas`` in order, calling ``push`` with each event.

        Raises:
            ValueError: arguments for a tool call that never started.
            BaseException: what ``on_error`` returned for an in-stream error.
        """
        run: list[str] = []  # the coalesced fragments not yet pushed
        run_kind = -1
        run_index = 0
        for d in deltas:
            kind = d[0]
            if kind in (_D_TEXT, _D_THINKING):
                text = d[1]
                if not text:
                    if kind == _D_THINKING:  # a thinking block with no text: its own
                        self._open(_THINKING, None)
                    continue
                block_kind = _TEXT if kind == _D_TEXT else _THINKING
                cur = self._cur
                if cur is None or cur[0] != block_kind:
                    cur = self._open(block_kind, None)
                self._add(cur, text)
                if not self._coalesce:
                    push((self._text if kind == _D_TEXT else self._thinking)(text))
                    continue
                if run_kind != kind:
                    self._flush(run, run_kind, run_index, push)
                    run_kind = kind
                run.append(text)
            elif kind == _D_TOOL_ARGS:
                index, fragment = d[1], d[2]
                tool = self._tools.get(index)
                if tool is None:
                    self._flush(run, run_kind, run_index, push)
                    raise ValueError(
                        f"arguments for tool call {index} before it started"
                    )
                if not fragment:
                    continue
                self._add(tool, fragment)
                if not self._coalesce:
                    push(self._args(index, fragment))
                    continue
                if run_kind != kind or run_index != index:
                    self._flush(run, run_kind, run_index, push)
                    run_kind, run_index = kind, index
                run.append(fragment)
            else:
                self._flush(run, run_kind, run_index, push)
                run_kind = -1
                self._other(d, push)
        self._flush(run, run_kind, run_index, push)

    def _flush(
        self, run: list[str], kind: int, index: int, push: Callable[[Any], Any]
    ) -> None:
        if not run:
            return
        text = run[0] if len(run) == 1 else "".join(run)
        run.clear()
        if kind == _D_TEXT:
            push(self._text(text))
        elif kind == _D_THINKING:
            push(self._thinking(text))
        else:
            push(self._args(index, text))

    def _other(self, d: tuple[Any, ...], push: Callable[[Any], Any]) -> None:
        kind = d[0]
        if kind == _D_SIGNATURE:
            cur = self._cur
            if cur is None or (cur[0] != _THINKING and cur[0] != _SEALED_THINKING):
                cur = self._open(_THINKING, None)
            cur[0] = _SEALED_THINKING
            cur[2] = (cur[2] or "") + d[1]
        elif kind == _D_REASONING_ITEM:
            cur = self._cur
            if cur is None or cur[0] != _THINKING:
                cur = self._open(_THINKING, None)
            cur[0] = _SEALED_THINKING
            cur[2] = d[1]
            self._cur = None  # the next item's summary is a block of its own
        elif kind == _D_TOOL_START:
            index, call_id, name = d[1], d[2], d[3]
            if index in self._tools:
                return
            # servers that send no id (some llama.cpp builds) still need unique ones
            call_id = call_id or f"call_{secrets.token_hex(6)}_{index}"
            self._tools[index] = self._open(_TOOL, (call_id, name))
            self._cur = None
            push(self._start(index, call_id, name))
        elif kind == _D_REDACTED:
            self._open(_REDACTED, d[1])
            self._cur = None
        elif kind == _D_USAGE:
            self.usage = d[1:]  # the counts, and a flag when they are estimated
        elif kind == _D_FINISH:
            self.finish_reason = d[1]
        elif kind == _D_MODEL:
            if d[1] != self.model:
                self.model = d[1]
                push(self._model(d[1]))
        elif kind == _D_ERROR:
            raise self._on_error(d[1], d[2])
        elif kind == _D_DONE:
            self.done = True

    def _open(self, kind: int, extra: Any) -> list[Any]:
        block: list[Any] = [kind, [], extra, 0]
        self._blocks.append(block)
        self._cur = block
        return block

    def _add(self, block: list[Any], text: str) -> None:
        pieces: list[str] = block[1]
        pieces.append(text)
        joined: int = block[3]
        if len(pieces) - joined >= _RUN:
            pieces[joined:] = ["".join(pieces[joined:])]
            block[3] = joined + 1

    def shown(self) -> tuple[int, int, int]:
        """What was pushed so far: characters of text and of thinking, tool calls."""
        text = thinking = 0
        for block in self._blocks:
            kind = block[0]
            if kind == _TEXT:
                text += sum(map(len, block[1]))
            elif kind in (_THINKING, _SEALED_THINKING):
                thinking += sum(map(len, block[1]))
        return text, thinking, len(self._tools)

    def blocks(self) -> list[tuple[int, str, Any]]:
        """Every block so far as ``(kind, text, extra)``, kinds ``_deltas.BLOCK_*``:
        text, thinking, sealed thinking (extra: signature or item), redacted (extra:
        data), tool call (extra: ``(id, name)``)."""
        return [(b[0], "".join(b[1]), b[2]) for b in self._blocks]
