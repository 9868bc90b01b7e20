"""The OpenAPI 3.1 document of ``navi-core serve``, served at ``/openapi.json``."""

from __future__ import annotations

from typing import Any

from .. import __version__

__all__ = ["openapi_document"]


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict[str, Any], description: str) -> dict[str, Any]:
    return {
        "description": description,
        "content": {"application/json": {"schema": schema}},
    }


def _errors(*codes: int) -> dict[str, Any]:
    text = {
        400: "a bad body or query; `field` names it",
        401: "no valid bearer token",
        403: "served without tokens: a request the browser marks as cross-site",
        404: "no such session",
        409: "another worker drives the session",
        413: "the body is over the limit",
        415: "served without tokens: a body not sent as Content-Type: application/json",
        421: "served without tokens: a Host name this server does not answer for",
        429: "too many steering messages wait already, or too many wrong tokens "
        "came from this address (Retry-After says when to try again)",
        500: "the server failed; the message names an error id its log explains",
        501: "not available in this build",
        502: "the model failed",
        503: "the server is shutting down",
    }
    return {str(c): _json(_ref("Error"), text[c]) for c in codes}


def _body(properties: dict[str, Any], required: tuple[str, ...] = ()) -> dict[str, Any]:
    schema: dict[str, Any] = {
        "type": "object",
        "properties": properties,
        "additionalProperties": False,
    }
    if required:
        schema["required"] = list(required)
    return {
        "required": bool(required),
        "content": {"application/json": {"schema": schema}},
    }


_SESSION_ID = {
    "name": "session_id",
    "in": "path",
    "required": True,
    "schema": {"type": "string"},
}
_PAGING = [
    {
        "name": "cursor",
        "in": "query",
        "required": False,
        "description": "`next_cursor` of the previous page",
        "schema": {"type": "string", "pattern": "^[0-9]{1,18}$"},
    },
]


def _limit(default: int) -> dict[str, Any]:
    return {
        "name": "limit",
        "in": "query",
        "required": False,
        "schema": {"type": "integer", "minimum": 1, "maximum": 256, "default": default},
    }


_STR = {"type": "string"}
_NULL_STR = {"type": ["string", "null"]}
_INT = {"type": "integer"}

_SCHEMAS: dict[str, Any] = {
    "Error": {
        "type": "object",
        "required": ["error", "message", "field"],
        "properties": {"error": _STR, "message": _STR, "field": _NULL_STR},
    },
    "Session": {
        "type": "object",
        "required": ["id", "created_at", "modified_at", "message_count"],
        "properties": {
            "id": _STR,
            "created_at": {"type": "number"},
            "modified_at": {"type": "number"},
            "message_count": _INT,
            "last_user_message": _NULL_STR,
            "model": _NULL_STR,
        },
    },
    "SessionPage": {
        "type": "object",
        "required": ["sessions", "next_cursor"],
        "properties": {
            "sessions": {"type": "array", "items": _ref("Session")},
            "next_cursor": _NULL_STR,
        },
    },
    "Message": {
        "description": "navi_core's stored message format (navi_core.codec): "
        "content blocks tagged text, thinking, redacted_thinking, tool_use, "
        "tool_result (parts text/media), system, compaction_summary",
        "type": "object",
        "required": ["v", "role", "content"],
        "properties": {
            "v": {"const": 1},
            "role": {"enum": ["system", "user", "assistant"]},
            "content": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["type"],
                    "properties": {"type": _STR},
                },
            },
            "usage": {"type": "object"},
            "stop_reason": _STR,
            "wire": {"type": "object"},
        },
    },
    "MessagePage": {
        "type": "object",
        "required": ["messages", "next_cursor"],
        "properties": {
            "messages": {"type": "array", "items": _ref("Message")},
            "next_cursor": _NULL_STR,
        },
    },
    "Running": {
        "type": "object",
        "required": ["running"],
        "properties": {"running": {"type": "boolean"}},
    },
    "Steered": {
        "type": "object",
        "required": ["disposition"],
        "properties": {"disposition": {"enum": ["queued", "next_turn"]}},
    },
    "Approval": {
        "type": "object",
        "required": ["call_id", "approved"],
        "properties": {"call_id": _STR, "approved": {"type": "boolean"}},
    },
    "Compaction": {
        "type": "object",
        "required": ["compacted", "summarized_messages", "kept_turns"],
        "properties": {
            "compacted": {"type": "boolean"},
            "summarized_messages": _INT,
            "kept_turns": _INT,
            "usage": {"type": "object"},
            "cost": {"type": ["object", "null"]},
        },
    },
}

_TURN_STREAM = {
    "description": "one SSE event per navi_core event: `event:` is the event class "
    "(TextDelta, ToolStarted, TurnComplete, ...), `data:` one line of JSON with "
    '`"type"` set to the same name and the event\'s fields (messages in the stored '
    "format); a failed turn ends with `event: error`",
    "content": {"text/event-stream": {"schema": {"type": "string"}}},
}


def _post(
    summary: str, body: dict[str, Any], ok: str, ok_schema: str, *errs: int
) -> Any:
    return {
        "summary": summary,
        "parameters": [_SESSION_ID],
        "requestBody": body,
        "responses": {ok: _json(_ref(ok_schema), summary), **_errors(*errs)},
    }


_URI_TOO_LONG = {
    "description": "the request line is over the server's limit (gunicorn's own answer)",
    "content": {"text/html": {"schema": {"type": "string"}}},
}


def openapi_document() -> dict[str, Any]:
    """The API described as OpenAPI 3.1."""
    doc = _document()
    for path in doc["paths"].values():
        for method, operation in path.items():
            codes = [403, 421, 429, 500] + ([415] if method == "post" else [])
            operation["responses"] = {
                **_errors(*codes),
                **operation["responses"],
                "414": _URI_TOO_LONG,
            }
    return doc


def _document() -> dict[str, Any]:
    text = {"type": ["string", "null"]}
    return {
        "openapi": "3.1.0",
        "info": {"title": "navi-core serve", "version": __version__},
        "components": {
            "schemas": _SCHEMAS,
            "securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}},
        },
        "security": [{"bearer": []}],
        "paths": {
            "/v1/sessions": {
                "get": {
                    "summary": "sessions, most recently modified first",
                    "parameters": [*_PAGING, _limit(50)],
                    "responses": {
                        "200": _json(_ref("SessionPage"), "a page of sessions"),
                        **_errors(400, 401),
                    },
                },
                "post": {
                    "summary": "start a session",
                    "requestBody": _body({"system": text}),
                    "responses": {
                        "201": _json(_ref("Session"), "the new session"),
                        **_errors(400, 401, 413),
                    },
                },
            },
            "/v1/sessions/{session_id}": {
                "get": {
                    "summary": "one session",
                    "parameters": [_SESSION_ID],
                    "responses": {
                        "200": _json(_ref("Session"), "the session"),
                        **_errors(401, 404),
                    },
                }
            },
            "/v1/sessions/{session_id}/messages": {
                "get": {
                    "summary": "the messages of every window, oldest first",
                    "parameters": [_SESSION_ID, *_PAGING, _limit(100)],
                    "responses": {
                        "200": _json(_ref("MessagePage"), "a page of messages"),
                        **_errors(400, 401, 404),
                    },
                }
            },
            "/v1/sessions/{session_id}/turns": {
                "post": {
                    "summary": "run a turn (no prompt: resume an interrupted one)",
                    "parameters": [_SESSION_ID],
                    "requestBody": _body({"prompt": text}),
                    "responses": {
                        "200": _TURN_STREAM,
                        **_errors(400, 401, 404, 409, 413, 503),
                    },
                }
            },
            "/v1/sessions/{session_id}/cancel": {
                "post": {
                    "summary": "cancel the running turn, in whichever worker it runs",
                    "parameters": [_SESSION_ID],
                    "requestBody": _body({}),
                    "responses": {
                        "200": _json(_ref("Running"), "no turn was running"),
                        "202": _json(_ref("Running"), "the turn was asked to stop"),
                        **_errors(400, 401, 404, 413),
                    },
                }
            },
            "/v1/sessions/{session_id}/steer": {
                "post": _post(
                    "add a user message to the running turn (or the next one)",
                    _body({"text": {"type": "string", "minLength": 1}}, ("text",)),
                    "202",
                    "Steered",
                    400,
                    401,
                    404,
                    413,
                    429,
                )
            },
            "/v1/sessions/{session_id}/approvals/{call_id}": {
                "post": {
                    **_post(
                        "approve or deny a tool call waiting for approval",
                        _body(
                            {
                                "approved": {"type": "boolean"},
                                "reason": text,
                                # the held call's content (pending_approvals): the
                                # decision applies to that call only
                                "call": {
                                    "type": ["object", "null"],
                                    "properties": {
                                        "tool": {"type": "string"},
                                        "input": {"type": "string"},
                                    },
                                    "required": ["tool", "input"],
                                    "additionalProperties": False,
                                },
                            },
                            ("approved",),
                        ),
                        "200",
                        "Approval",
                        400,
                        401,
                        404,
                        409,
                        413,
                        501,
                    ),
                    "parameters": [
                        _SESSION_ID,
                        {
                            "name": "call_id",
                            "in": "path",
                            "required": True,
                            "schema": _STR,
                        },
                    ],
                }
            },
            "/v1/sessions/{session_id}/compact": {
                "post": _post(
                    "summarise the old part of the conversation now",
                    _body(
                        {
                            "instructions": text,
                            "keep_turns": {"type": "integer", "minimum": 0},
                        }
                    ),
                    "200",
                    "Compaction",
                    400,
                    401,
                    404,
                    409,
                    413,
                    502,
                )
            },
        },
    }
