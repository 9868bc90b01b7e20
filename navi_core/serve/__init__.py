"""``navi-core serve``: agent sessions over HTTP for WSGI workers on many hosts.

``make_app(store, provider)`` is the WSGI application (embed it in any WSGI server);
``navi_core.serve.server`` runs it under gunicorn (the ``serve`` extra) with the
workers of ``navi_core.serve.worker``, which read each request whole before a thread
takes it. The wire format of the events is in ``wire``.
"""

from __future__ import annotations

from .app import ServeApp, make_app
from .auth import BearerAuth, tokens_from, weak_token
from .control import ControlBus, LocalControl, PostgresControl, SQLiteControl
from .throttle import AuthThrottle
from .wire import decode_event, encode_event

__all__ = [
    "AuthThrottle",
    "BearerAuth",
    "ControlBus",
    "LocalControl",
    "PostgresControl",
    "SQLiteControl",
    "ServeApp",
    "decode_event",
    "encode_event",
    "make_app",
    "tokens_from",
    "weak_token",
]
