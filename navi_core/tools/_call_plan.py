"""What ``Tool.invoke`` works out once per tool instead of on every call.

The parameters that take the injected ``ToolContext``, which arguments need
``schema.convert`` at all (a ``str``, ``bool`` or ``Any`` value never changes; an
``int`` only from a float, a ``float`` only from an integer) and the schema compiled
by ``fast_validation``. The results are those of checking and converting every
argument on each call, errors included.
"""

from __future__ import annotations

import types
import typing
from collections.abc import Mapping
from typing import Annotated, Any, Literal, Union

from . import _pydantic as pydantic_types
from ._fast_validation import Check, compile_schema
from ._schema import converted

__all__ = ["CallPlan"]


def _converts_from(tp: Any) -> type | None:
    """The values ``convert(tp, value)`` may change: None when it returns every value
    as it is, else a class the value must be an instance of (``object``: any)."""
    if tp is str or tp is bool or tp is Any or tp is object:
        return None
    if tp is int:
        return float
    if tp is float:
        return int
    origin = typing.get_origin(tp)
    if origin is Literal:
        return None
    if origin is Annotated and not pydantic_types.has_validators(tp.__metadata__):
        return _converts_from(typing.get_args(tp)[0])
    if origin in (Union, types.UnionType):
        # None stays None; else the first other type converts, unless it raises,
        # and these never raise a conversion error
        first = next(a for a in typing.get_args(tp) if a is not type(None))
        return _converts_from(first)
    return object


class CallPlan:
    """One tool's call plan, built from its schema and type hints.

    ``valid`` answers True only for arguments ``validation.errors`` accepts (None
    when the schema is outside the compiled subset); ``context`` names the
    parameters given the ``ToolContext``; ``takes_context`` says whether the call
    reads one at all; ``keywords`` converts the arguments.
    """

    __slots__ = ("_plain", "_skip", "_targets", "context", "takes_context", "valid")

    def __init__(
        self,
        parameters: Mapping[str, Any],
        hints: Mapping[str, Any],
        context: tuple[str, ...],
        *,
        awaits: bool = True,
    ) -> None:
        self.valid: Check | None = compile_schema(parameters)
        self.context = context
        #: the call reads its ``ToolContext``: a parameter takes it, or the function
        #: may return a coroutine (``awaits``), which is cancelled through it
        self.takes_context = bool(context) or awaits
        self._skip = frozenset(context)
        self._targets: dict[str, tuple[Any, type]] = {}
        for name, tp in hints.items():
            needs = _converts_from(tp)
            if needs is not None and name not in self._skip:
                self._targets[name] = (tp, needs)
        self._plain = not self._targets and not self._skip

    def keywords(self, arguments: Mapping[str, Any]) -> dict[str, Any]:
        """The arguments converted to the annotated types, without the ones naming a
        context parameter.

        Raises:
            ConversionError: a value does not convert (from ``convert``).
        """
        if self._plain and type(arguments) is dict:
            return arguments.copy()
        skip = self._skip
        targets = self._targets
        out: dict[str, Any] = {}
        for key, value in arguments.items():
            if key in skip:
                continue
            target = targets.get(key)
            if target is not None and isinstance(value, target[1]):
                value = converted(target[0], value, key)
            out[key] = value
        return out
