"""Pydantic models and ``Annotated[T, Field(...)]`` in tool signatures and outputs.

Pydantic is optional (the ``pydantic`` extra). It is never imported
here: a type can only be a pydantic model, or carry a ``Field``, when the caller's
code imported pydantic already, so ``sys.modules`` answers without the import cost.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import Any

__all__ = [
    "error_lines",
    "has_validators",
    "is_model",
    "is_pydantic_metadata",
    "path_text",
    "schema",
    "validate",
]


def _pydantic() -> Any:
    return sys.modules.get("pydantic")


def is_model(tp: Any) -> bool:
    """Whether ``tp`` is a pydantic model class."""
    pydantic = _pydantic()
    return (
        pydantic is not None
        and isinstance(tp, type)
        and issubclass(tp, pydantic.BaseModel)
    )


def is_pydantic_metadata(metadata: Iterable[Any]) -> bool:
    """Whether ``Annotated`` metadata holds a pydantic ``Field`` or an
    ``annotated_types`` constraint (``Ge``, ``MaxLen`` ...), which pydantic reads."""
    if _pydantic() is None:
        return False
    return any(
        type(m).__module__.split(".")[0] in ("pydantic", "annotated_types")
        for m in metadata
    )


def has_validators(metadata: Iterable[Any]) -> bool:
    """Whether ``Annotated`` metadata holds pydantic validator functions
    (``AfterValidator`` ...), which only pydantic can run; the constraints of a
    ``Field`` are in the JSON schema and checked with it."""
    return any(type(m).__module__ == "pydantic.functional_validators" for m in metadata)


def schema(tp: Any) -> dict[str, Any]:
    """The JSON schema pydantic gives ``tp`` (its ``$defs`` kept at the top)."""
    adapter = _pydantic().TypeAdapter(tp)
    out: dict[str, Any] = adapter.json_schema()
    return out


def validate(tp: Any, value: Any) -> Any:
    """``value`` validated into ``tp`` by pydantic.

    Raises:
        ValueError: pydantic's ``ValidationError`` (a ``ValueError``).
    """
    if is_model(tp):
        return tp.model_validate(value)
    return _pydantic().TypeAdapter(tp).validate_python(value)


def error_lines(exc: BaseException, root: str = "") -> list[str] | None:
    """A pydantic ``ValidationError`` as "`path`: message" lines, else None; ``root``
    starts every path (the parameter the validated value was)."""
    pydantic = _pydantic()
    if pydantic is None or not isinstance(exc, pydantic.ValidationError):
        return None
    lines = []
    for err in exc.errors(include_url=False):
        path = path_text(err.get("loc", ()), root)
        where = f"`{path}`" if path else "the value"
        lines.append(f"{where}: {err.get('msg', 'invalid')}")
    return lines


def path_text(parts: Iterable[str | int], start: str = "") -> str:
    """A value's place as a path: ``start``, then ``.key`` per key, ``[i]`` per index."""
    path = start
    for part in parts:
        if isinstance(part, int):
            path = f"{path}[{part}]"
        else:
            path = f"{path}.{part}" if path else str(part)
    return path
