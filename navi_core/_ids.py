"""Random ids for sessions and turns.

Every turn makes one and a ``NullStore`` session another, so an id costs no system
call: ``os.urandom`` gives the GIL away, and while many streams share a process each
give-away is a thread switch. An id is instead BLAKE2b, keyed with 32 bytes of
``os.urandom`` per process, of a counter: unpredictable to anyone without the key (a
keyed hash of distinct inputs is a pseudorandom function) and never repeated within a
process. A forked child takes a new key, so it repeats none of its parent's ids.
"""

from __future__ import annotations

import itertools
import os
from hashlib import blake2b

__all__ = ["new_id"]

_key = os.urandom(32)
_count = itertools.count()  # next() on it is atomic under the GIL


def _rekey() -> None:
    global _key, _count
    _key = os.urandom(32)
    _count = itertools.count()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_rekey)


def new_id() -> str:
    """32 hex digits, shaped as ``uuid.uuid4().hex`` gives (version 4, RFC 4122
    variant), made without a ``UUID`` object or a system call."""
    b = bytearray(
        blake2b(next(_count).to_bytes(16, "little"), key=_key, digest_size=16).digest()
    )
    b[6] = (b[6] & 0x0F) | 0x40
    b[8] = (b[8] & 0x3F) | 0x80
    return b.hex()
