"""Random ids for sessions and turns."""

from __future__ import annotations

import os

__all__ = ["new_id"]


def new_id() -> str:
    """32 hex digits, as ``uuid.uuid4().hex`` gives (version 4, RFC 4122 variant),
    made without a ``UUID`` object: one is made for every turn."""
    b = bytearray(os.urandom(16))
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return b.hex()
