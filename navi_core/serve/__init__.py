"""``navi-core serve``: agent sessions over HTTP for WSGI workers on many hosts.

``make_app(store, provider)`` is the WSGI application (embed it in any WSGI server);
``navi_core.serve.server`` runs it under gunicorn (the ``serve`` extra). The wire
format of the events is in ``wire``.
"""

from __future__ import annotations

from .app import ServeApp, make_app
from .auth import BearerAuth, tokens_from
from .control import ControlBus, LocalControl, PostgresControl, SQLiteControl
from .wire import decode_event, encode_event

__all__ = [
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
]
