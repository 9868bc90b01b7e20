"""A provider whose deltas are built once, before anything is measured.

It stands for a parser that costs nothing, so a benchmark through it measures the loop
alone: ``Stream.next()``, the assembler, the phase machine. ``per_read`` is how many
deltas one simulated network read holds (1: the worst case; a fast server's 16 KiB read
holds a hundred or more).
"""

from __future__ import annotations

from typing import Any

from navi_core import _deltas as D
from navi_core.conversation import WireIdentity
from navi_core.providers.base import ProviderRequest
from navi_core.providers.delta_stream import DeltaStream

__all__ = ["Prebuilt", "PrebuiltToolTurns"]


class Prebuilt:
    """Answers every request with the same ``deltas`` text deltas of 4 characters."""

    def __init__(self, deltas: int, per_read: int = 1) -> None:
        self.wire = WireIdentity("scripted", "scripted://prebuilt", "prebuilt")
        body: list[tuple[Any, ...]] = [(D.MODEL, "prebuilt")]
        body += [(D.TEXT, "abcd")] * deltas
        self._batches = [body[i : i + per_read] for i in range(0, len(body), per_read)]
        self._batches.append(
            [(D.FINISH, "stop"), (D.USAGE, 1, deltas, 0, 0, 0), (D.DONE,)]
        )

    def open(self, request: ProviderRequest) -> DeltaStream:
        return DeltaStream(
            iter(self._batches), self.wire, coalesce=request.config.coalesce_deltas
        )

    def close(self) -> None:
        pass


class PrebuiltToolTurns:
    """Tool turns with nothing to parse: the first response of each turn calls the tool
    ``name`` ``calls`` times (arguments ``{"n": i}``), the second answers in text; each
    response's deltas arrive in one simulated read, built once."""

    def __init__(self, calls: int, name: str = "noop") -> None:
        self.wire = WireIdentity("scripted", "scripted://prebuilt", "prebuilt")
        uses: list[tuple[Any, ...]] = [(D.MODEL, "prebuilt"), (D.TEXT, "calling tools")]
        for i in range(calls):
            uses += [
                (D.TOOL_START, i, f"c{i}", name),
                (D.TOOL_ARGS, i, f'{{"n": {i}}}'),
            ]
        self._responses = (
            [uses, [(D.FINISH, "tool_use"), (D.USAGE, 10, 5, 0, 0, 0), (D.DONE,)]],
            [
                [(D.MODEL, "prebuilt"), (D.TEXT, "all done here")],
                [(D.FINISH, "stop"), (D.USAGE, 20, 3, 0, 0, 0), (D.DONE,)],
            ],
        )
        self._opened = 0

    def open(self, request: ProviderRequest) -> DeltaStream:
        batches = self._responses[self._opened % 2]
        self._opened += 1
        return DeltaStream(
            iter(batches), self.wire, coalesce=request.config.coalesce_deltas
        )

    def close(self) -> None:
        pass
