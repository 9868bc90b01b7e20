"""Context compaction: summarise the old prefix of a conversation, keep recent turns."""

from __future__ import annotations

from ._compaction import (
    DEFAULT_SUMMARY_PROMPT,
    MIN_FOLD_TOKENS,
    CompactionResult,
    PendingCompaction,
    SizeCache,
    Split,
    apply_pending,
    compact,
    estimate_request_tokens,
    message_sizes,
    plan_compaction,
    run_compaction,
    split,
    summarise_pending,
)

__all__ = [
    "DEFAULT_SUMMARY_PROMPT",
    "MIN_FOLD_TOKENS",
    "CompactionResult",
    "PendingCompaction",
    "SizeCache",
    "Split",
    "compact",
    "estimate_request_tokens",
    "message_sizes",
    "plan_compaction",
    "apply_pending",
    "run_compaction",
    "split",
    "summarise_pending",
]
