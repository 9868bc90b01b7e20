"""Log records of navi_core, httpx and httpcore with every known secret redacted.

httpx logs each request at INFO (``HTTP Request: POST https://user:pass@host/...``)
and httpcore traces connections and response headers at DEBUG: a key in a base URL
or echoed by a server would reach the logs. ``SecretFilter`` is a ``logging.Filter``
that rewrites a record's message (and its traceback text) with every registered
secret, in every spelling (``_secrets.secret_forms``), replaced by ``[REDACTED]``,
and URL credentials (user info, secret-looking query or ``;`` parameters) removed
whatever the URL.

``protect(secrets)`` registers secrets and installs the one filter on the
``navi_core``, ``httpx`` and ``httpcore`` loggers and on every logger under them that
exists by then (and on the ones httpcore makes on its first request); each HTTP
provider calls it when it is made. A module under ``navi_core`` takes its logger from
``get_logger(__name__)``, which carries the filter whenever it is made; any other
logger made later under those names is covered at the next ``protect`` or
``install()``. A handler can carry ``SECRET_FILTER`` too.
Logging is process-wide, so the filter is the one process-wide object here.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable
from typing import Final

from ._secrets import REDACTED, looks_secret_param, redact, secret_forms

__all__ = [
    "PROTECTED_LOGGERS",
    "SECRET_FILTER",
    "SecretFilter",
    "get_logger",
    "install",
    "protect",
    "redact_urls",
]

PROTECTED_LOGGERS: Final = ("navi_core", "httpx", "httpcore")
"""The loggers (and their children) whose records are redacted."""

#: httpcore makes these when it first traces a request, after any provider exists:
#: made here first, they carry the filter when httpcore gets them
_LATE_LOGGERS: Final = (
    "httpcore.connection",
    "httpcore.http11",
    "httpcore.http2",
    "httpcore.proxy",
    "httpcore.socks",
)

_USERINFO: Final = re.compile(r"(?P<scheme>[A-Za-z][A-Za-z0-9+.\-]*://)[^/\s@?#'\"]+@")
_PARAM: Final = re.compile(r"(?P<head>[?&;](?P<name>[^=&;#\s/'\"]+)=)[^&;#\s'\"]*")


def redact_urls(text: str) -> str:
    """``text`` with URL user info and secret-looking URL parameter values redacted."""
    if "://" in text and "@" in text:
        text = _USERINFO.sub(rf"\g<scheme>{REDACTED}@", text)
    if "=" in text:
        text = _PARAM.sub(_param, text)
    return text


def _param(match: re.Match[str]) -> str:
    if looks_secret_param(match["name"]):
        return match["head"] + REDACTED
    return match[0]


class SecretFilter(logging.Filter):
    """Redacts the registered secrets and URL credentials from every record it sees.

    It never drops a record: ``filter`` always returns True, after rewriting
    ``msg`` (formatted, with ``args`` cleared) and ``exc_text``.
    """

    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.Lock()
        self._secrets: tuple[str, ...] = ()

    def add(self, secrets: Iterable[str]) -> None:
        """Register secrets (each in all its spellings)."""
        forms = {f for s in secrets if s for f in secret_forms(s)}
        with self._lock:
            merged = set(self._secrets) | forms
            self._secrets = tuple(sorted(merged, key=lambda s: (-len(s), s)))

    def clean(self, text: str) -> str:
        """``text`` with every registered secret and URL credential redacted."""
        return redact_urls(redact(text, self._secrets))

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a broken format string: keep the raw parts, redacted
            message = f"{record.msg!r} {record.args!r}"
        record.msg = self.clean(message)
        record.args = None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = self.clean(record.exc_text)
            record.exc_info = None  # the formatter uses the cleaned text
        if record.stack_info:
            record.stack_info = self.clean(record.stack_info)
        return True


SECRET_FILTER: Final = SecretFilter()
"""The process-wide filter ``protect`` and ``install`` put on the loggers."""


def install() -> None:
    """Put ``SECRET_FILTER`` on the protected loggers and every existing child."""
    names = [
        name
        for name in list(logging.root.manager.loggerDict)
        if name.partition(".")[0] in PROTECTED_LOGGERS
    ]
    for name in {*PROTECTED_LOGGERS, *_LATE_LOGGERS, *names}:
        logger = logging.getLogger(name)
        if SECRET_FILTER not in logger.filters:
            logger.addFilter(SECRET_FILTER)


def get_logger(name: str) -> logging.Logger:
    """``logging.getLogger(name)`` with ``SECRET_FILTER`` on it: the way a module
    under ``navi_core`` gets its logger, so its records are redacted from the start."""
    logger = logging.getLogger(name)
    if SECRET_FILTER not in logger.filters:
        logger.addFilter(SECRET_FILTER)
    return logger


def protect(secrets: Iterable[str]) -> None:
    """Register ``secrets`` with ``SECRET_FILTER`` and install it (idempotent)."""
    SECRET_FILTER.add(secrets)
    install()
