"""MCP over streamable HTTP: each request is one POST, answered by JSON or SSE.

Each request of a batch is posted on a thread of its own, so the calls overlap as they
do over stdio; the event-stream answers are read with the core's ``SSEDecoder``. The
URL is shown only in its public form, and the credentials the requests carry (headers,
URL user info, secret query values) are redacted from everything the server says
before it becomes an error or a result.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx
import orjson

from .. import core
from .._logs import protect
from .._secrets import clip, public_url, redact, request_secrets
from ._wire import (
    CLOSE_WAIT,
    MAX_MESSAGE_BYTES,
    Call,
    MCPError,
    notification_bytes,
    request_bytes,
)

__all__ = ["HTTPTransport"]

#: bytes of an error answer read for its message (the message is cut far shorter)
_ERROR_BYTES: Final = 64 * 1024
#: characters of an error answer's text put in the error
_ERROR_CHARS: Final = 300


class HTTPTransport:
    """A streamable HTTP endpoint: each request is a POST answered by JSON or SSE.

    The ``mcp-session-id`` the server hands out in the initialize answer is sent back
    on every later request, with ``mcp-protocol-version`` once it is known; ``close()``
    ends the session with a DELETE. ``url`` is the public form of the endpoint;
    headers and URL credentials never appear in an error or a result. An answer (a
    JSON body or one event) larger than ``max_message_bytes`` fails its call.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
        *,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self.url = public_url(url)
        self._url = url
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(30.0))
        self._headers = {
            **(headers or {}),
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        self.secrets = request_secrets(self._headers, url, self.url)
        protect(self.secrets)  # httpx logs each request
        self._max = max_message_bytes
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None

    def __repr__(self) -> str:
        return f"<HTTPTransport {self.url!r}>"

    @property
    def alive(self) -> bool:
        return not self._closed

    def _session_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    def start(
        self, method: str, params: Mapping[str, Any] | None, deadline: float
    ) -> Call:
        """POST the request on a thread of its own, so a batch's calls overlap."""
        with self._lock:
            self._next_id += 1
            call = Call(self._next_id, method, self.secrets)
        body = request_bytes(call.id, method, params)
        if method == "initialize":  # the session id it brings is needed by the rest
            self._post(call, body, deadline)
        else:
            threading.Thread(
                target=self._post, args=(call, body, deadline), daemon=True
            ).start()
        return call

    def wait(self, call: Call, deadline: float) -> Any:
        # the POST has the same deadline: a little grace lets it report its own error
        if not call.done.wait(max(0.0, deadline - time.monotonic()) + 0.5):
            raise MCPError(f"{call.method}: {self.url} did not answer in time")
        if call.error is not None:
            raise call.error
        return call.result

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        with contextlib.suppress(httpx.HTTPError):
            self._client.post(
                self._url,
                content=notification_bytes(method, params),
                headers=self._session_headers(),
            ).close()

    def _post(self, call: Call, body: bytes, deadline: float) -> None:
        try:
            self._exchange(call, body, deadline)
        except MCPError as exc:
            call.fail(exc)
        if not call.done.is_set():
            call.fail(MCPError(f"{call.method}: {self.url} sent no answer"))

    def _exchange(self, call: Call, body: bytes, deadline: float) -> None:
        timeout = max(0.001, deadline - time.monotonic())
        try:
            with self._client.stream(
                "POST",
                self._url,
                content=body,
                headers=self._session_headers(),
                timeout=httpx.Timeout(timeout),
            ) as response:
                if response.status_code == 404 and self.session_id is not None:
                    self._closed = True  # the server forgot the session: reconnect
                    raise MCPError(
                        f"{call.method}: the MCP session expired at {self.url}"
                    )
                if response.status_code >= 400:
                    raise self._status_error(call, response)
                if call.method == "initialize":
                    self.session_id = response.headers.get("mcp-session-id")
                kind = response.headers.get("content-type", "")
                if kind.startswith("text/event-stream"):
                    self._read_events(call, response, deadline)
                else:
                    self._settle(call, orjson.loads(self._read(call, response)))
        except httpx.TimeoutException as exc:
            raise self._failed(
                exc, f"{call.method}: {self.url} did not answer in time"
            ) from exc
        except httpx.ConnectError as exc:
            raise self._failed(
                exc,
                f"{call.method}: cannot connect to {self.url} (is the server running?)",
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise self._failed(
                exc,
                f"{call.method}: the connection to {self.url} broke before the answer "
                f"came (the server may have crashed): {type(exc).__name__}",
            ) from exc
        except httpx.HTTPError as exc:
            text = (
                f"{call.method}: cannot reach {self.url}: {type(exc).__name__}: {exc}"
            )
            raise self._failed(exc, text) from exc
        except orjson.JSONDecodeError as exc:
            raise MCPError(f"{call.method}: {self.url} sent invalid JSON") from exc

    def _failed(self, exc: BaseException, text: str) -> MCPError:
        """An ``MCPError`` of ``text``, and ``exc`` with its causes, all redacted
        (an httpx error may quote the URL it was sent to)."""
        seen: set[int] = set()
        current: BaseException | None = exc
        while current is not None and id(current) not in seen:
            seen.add(id(current))
            current.args = tuple(
                redact(a, self.secrets) if isinstance(a, str) else a
                for a in current.args
            )
            current = current.__cause__ or current.__context__
        return MCPError(clip(redact(text, self.secrets)))

    def _status_error(self, call: Call, response: httpx.Response) -> MCPError:
        """The error of an error status, with what the server said, redacted."""
        raw = b""
        with contextlib.suppress(httpx.HTTPError):
            for chunk in response.iter_bytes():
                raw += chunk
                if len(raw) >= _ERROR_BYTES:
                    break
        # redacted before it is cut, so no part of a secret is left at the cut
        text = redact(raw[:_ERROR_BYTES].decode("utf-8", "replace"), self.secrets)
        if len(text) > _ERROR_CHARS:
            text = text[: _ERROR_CHARS - 3] + "..."
        return MCPError(
            f"{call.method}: HTTP {response.status_code} from {self.url}: {text}"
        )

    def _too_big(self, call: Call) -> MCPError:
        return MCPError(
            f"{call.method}: {self.url} sent an answer larger than {self._max} bytes "
            "(max_message_bytes)"
        )

    def _read(self, call: Call, response: httpx.Response) -> bytes:
        """The whole body (decoded), refused past ``max_message_bytes``."""
        parts, size = [], 0
        for chunk in response.iter_bytes():
            size += len(chunk)
            if size > self._max:
                raise self._too_big(call)
            parts.append(chunk)
        return b"".join(parts)

    def _read_events(
        self, call: Call, response: httpx.Response, deadline: float
    ) -> None:
        """Settle ``call`` from the event stream; an event growing past
        ``max_message_bytes`` or a stream still open at ``deadline`` fails it."""
        decoder = core.SSEDecoder()
        pending = 0  # bytes read since the last event ended
        for chunk in response.iter_raw():
            pending += len(chunk)
            for event in decoder.feed(chunk):
                pending = 0
                if event.data:
                    self._settle(call, orjson.loads(event.data))
            if call.done.is_set():
                return
            if pending > self._max:
                raise self._too_big(call)
            if time.monotonic() > deadline:
                raise MCPError(f"{call.method}: {self.url} did not answer in time")
        for event in decoder.close():
            if event.data:
                self._settle(call, orjson.loads(event.data))

    def _settle(self, call: Call, message: Any) -> None:
        for item in message if isinstance(message, list) else [message]:
            if (
                isinstance(item, dict)
                and item.get("id") == call.id
                and "method" not in item
            ):
                call.settle(item)

    def close(self) -> None:
        if self._closed and self.session_id is None:
            return
        self._closed = True
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                self._client.delete(
                    self._url, headers=self._session_headers(), timeout=CLOSE_WAIT
                ).close()
            self.session_id = None
        if self._own_client:
            self._client.close()
