"""The WSGI plumbing of ``navi-core serve``: requests, JSON bodies, errors, responses.

Every error leaves as JSON, ``{"error": code, "message": text, "field": name|null}``,
with the HTTP status that says what the client can do: 400 names the field of a bad
body or query, 401 a missing or wrong token, 404 an unknown session, 409 a session
another worker drives, 411 a chunked body the WSGI server does not end, 413 a body
over the limit, 429 a full steering queue or too many wrong tokens (with
``Retry-After``), 500 a failure whose details only the server log has (an error id
names them), 502 a model that failed; served without tokens, 403 a cross-site
request, 415 a body that is not JSON, 421 a ``Host`` this server does not answer for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs

import orjson

__all__ = [
    "HTTPError",
    "Request",
    "Response",
    "json_response",
    "only_fields",
    "optional_str",
]

JSON_TYPE = "application/json"


class HTTPError(Exception):
    """An error answer: status, machine-readable code, text and the field at fault."""

    def __init__(
        self, status: int, code: str, message: str, field: str | None = None
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.field = field
        #: extra headers of the answer (``Retry-After``, ``Allow``)
        self.headers: list[tuple[str, str]] = []

    def response(self) -> Response:
        body = {"error": self.code, "message": self.message, "field": self.field}
        response = json_response(body, self.status)
        response.headers += self.headers
        return response


@dataclass
class Response:
    """What a handler returns: status, headers and the body chunks."""

    status: int
    body: Iterable[bytes]
    headers: list[tuple[str, str]] = field(default_factory=list)

    def status_line(self) -> str:
        return f"{self.status} {HTTPStatus(self.status).phrase}"


def json_response(obj: Any, status: int = 200) -> Response:
    """``obj`` as a JSON response."""
    body = orjson.dumps(obj)
    headers = [("Content-Type", JSON_TYPE), ("Content-Length", str(len(body)))]
    return Response(status, [body], headers)


class Request:
    """One WSGI request, read lazily: the body only when a handler asks for it."""

    __slots__ = ("_body", "environ", "max_body", "method", "path", "query")

    def __init__(self, environ: Mapping[str, Any], max_body: int) -> None:
        self.environ = environ
        self.method: str = environ.get("REQUEST_METHOD", "GET").upper()
        self.path: str = environ.get("PATH_INFO", "") or "/"
        self.query = parse_qs(environ.get("QUERY_STRING", ""), keep_blank_values=True)
        self.max_body = max_body
        self._body: bytes | None = None

    def header(self, name: str) -> str | None:
        """A request header by its HTTP name (``Authorization``)."""
        key = "HTTP_" + name.upper().replace("-", "_")
        if name.lower() == "content-type":
            key = "CONTENT_TYPE"
        value = self.environ.get(key)
        return value if isinstance(value, str) else None

    def body(self) -> bytes:
        """The whole body, refused with 413 past ``max_body`` bytes (before reading it
        when ``Content-Length`` says so, after ``max_body + 1`` bytes otherwise).

        Without ``Content-Length`` the body is empty (PEP 3333: reading on would wait
        for bytes that never come) unless the server ends ``wsgi.input`` itself
        (``wsgi.input_terminated``, as gunicorn does for a chunked body); a chunked
        body that it does not end is refused with 411.
        """
        if self._body is not None:
            return self._body
        length_text = self.environ.get("CONTENT_LENGTH") or ""
        stream = self.environ["wsgi.input"]
        try:
            if length_text:
                length = int(length_text) if length_text.isdigit() else -1
                if length < 0:
                    raise HTTPError(400, "bad_request", "bad Content-Length", "body")
                if length > self.max_body:
                    raise self._too_large()
                data = stream.read(length) if length else b""
                if len(data) < length:
                    raise EOFError(f"{len(data)} of {length} bytes")
            elif self.environ.get("wsgi.input_terminated"):
                data = stream.read(self.max_body + 1)
                if len(data) > self.max_body:
                    raise self._too_large()
            elif "chunked" in str(self.environ.get("HTTP_TRANSFER_ENCODING", "")):
                raise HTTPError(
                    411,
                    "length_required",
                    "this server cannot read a chunked body: send Content-Length",
                    "body",
                )
            else:
                data = b""
        except HTTPError:
            raise
        except Exception:  # the server's reader: a bad chunk, a cut body
            raise HTTPError(
                400, "bad_request", "the body could not be read whole", "body"
            ) from None
        self._body = bytes(data)
        return self._body

    def json_object(self) -> dict[str, Any]:
        """The body as a JSON object; an empty body is ``{}``.

        Raises:
            HTTPError: 400 naming ``body`` for bad JSON or a non-object, 413 too large.
        """
        data = self.body()
        if not data.strip():
            return {}
        try:
            obj = orjson.loads(data)
        except orjson.JSONDecodeError as exc:
            raise HTTPError(
                400, "bad_json", f"the body is not JSON: {exc}", "body"
            ) from None
        if not isinstance(obj, dict):
            raise HTTPError(400, "bad_json", "the body must be a JSON object", "body")
        return obj

    def only_query(self, known: tuple[str, ...]) -> None:
        """400 naming the first query parameter not in ``known``."""
        for name in self.query:
            if name not in known:
                takes = ", ".join(known) if known else "none"
                raise HTTPError(
                    400,
                    "bad_request",
                    f"unknown query parameter {name[:40]!r} (this endpoint takes: "
                    f"{takes})",
                    name[:40],
                )

    def query_one(self, name: str) -> str | None:
        """Query parameter ``name``, or None; 400 naming it when given twice."""
        values = self.query.get(name)
        if values and len(values) > 1:
            raise HTTPError(400, "bad_request", f"{name} is given more than once", name)
        return values[0] if values else None

    def query_int(self, name: str, default: int, low: int, high: int) -> int:
        """An integer query parameter within ``[low, high]``; 400 naming it if not."""
        raw = self.query_one(name)
        if raw is None:
            return default
        value = (
            int(raw) if raw.isascii() and raw.isdigit() and len(raw) <= 18 else low - 1
        )
        if not low <= value <= high:
            raise HTTPError(
                400,
                "bad_request",
                f"{name} must be an integer from {low} to {high}, got {raw[:40]!r}",
                name,
            )
        return value

    def _too_large(self) -> HTTPError:
        return HTTPError(
            413,
            "body_too_large",
            f"the body is larger than the limit of {self.max_body} bytes",
            "body",
        )


def optional_str(obj: Mapping[str, Any], key: str, max_chars: int) -> str | None:
    """``obj[key]`` when it is a string (None when absent or null); 400 naming it if not."""
    value = obj.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise HTTPError(
            400,
            "bad_request",
            f"{key} must be a string, got {type(value).__name__}",
            key,
        )
    if len(value) > max_chars:
        raise HTTPError(
            400, "bad_request", f"{key} is longer than {max_chars} characters", key
        )
    return value


def only_fields(obj: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """400 naming the first key of ``obj`` outside ``allowed``."""
    known = set(allowed)
    for key in obj:
        if key not in known:
            raise HTTPError(
                400,
                "bad_request",
                f"unknown field {key[:40]!r}; allowed: {', '.join(sorted(known))}",
                key[:100],
            )
