"""Context compaction (placeholder until the summariser lands)."""

from __future__ import annotations
from typing import Any

def auto_compact(agent: Any, config: Any, *, reason: str, force: bool = False) -> list[Any]:
    return []

def compact(agent: Any, config: Any, extra: Any) -> Any:
    raise NotImplementedError
