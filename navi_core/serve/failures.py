"""What a client is told about a failure, and what only the server log is.

navi_core's own errors are written for the caller (a provider's answer, a lost session
lock, a busy session) and never hold a key: they go out as their class and text. A
store that failed in its driver raises a plain ``SessionError`` naming the database
(its path or host), and anything else is a fault of the server: those go out as
``internal_error`` with an error id, and the log has the details under that id.
"""

from __future__ import annotations

import secrets
from typing import Final

from .._logs import get_logger
from ..errors import NaviError, SessionError

__all__ = ["INTERNAL", "describe", "hidden"]

log = get_logger("navi_core.serve")

#: the error code of a failure whose details stay in the log
INTERNAL: Final = "internal_error"


def hidden(exc: BaseException, doing: str) -> str:
    """Log that ``doing`` failed with ``exc`` under a new error id; the message that
    tells a client only that id."""
    error_id = secrets.token_hex(6)
    log.error("%s failed (error id %s)", doing, error_id, exc_info=exc)
    return f"the server failed (error id {error_id}; its log has the details)"


def describe(exc: BaseException, doing: str) -> tuple[str, str]:
    """(error code, message) telling a client that ``doing`` failed with ``exc``."""
    if isinstance(exc, NaviError) and type(exc) is not SessionError:
        return type(exc).__name__, str(exc)
    return INTERNAL, hidden(exc, doing)
