"""MCP over streamable HTTP: each request is one POST, answered by JSON or SSE.

Each request of a batch is posted on a thread of its own, so the calls overlap as they
do over stdio; the event-stream answers are read with the core's ``SSEDecoder``.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Mapping
from typing import Any

import httpx
import orjson

from .. import core
from ._wire import CLOSE_WAIT, Call, MCPError, notification_bytes, request_bytes

__all__ = ["HTTPTransport"]


class HTTPTransport:
    """A streamable HTTP endpoint: each request is a POST answered by JSON or SSE.

    The ``mcp-session-id`` the server hands out in the initialize answer is sent back
    on every later request, with ``mcp-protocol-version`` once it is known; ``close()``
    ends the session with a DELETE. Headers (an Authorization token) never appear in
    an error message.
    """

    def __init__(
        self,
        url: str,
        headers: Mapping[str, str] | None = None,
        client: httpx.Client | None = None,
    ) -> None:
        self.url = url
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(30.0))
        self._headers = {
            **(headers or {}),
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None

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
            call = Call(self._next_id, method)
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
                self.url,
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
                self.url,
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
                    text = response.read()[:300].decode("utf-8", "replace")
                    raise MCPError(
                        f"{call.method}: HTTP {response.status_code} from {self.url}: {text}"
                    )
                if call.method == "initialize":
                    self.session_id = response.headers.get("mcp-session-id")
                kind = response.headers.get("content-type", "")
                if kind.startswith("text/event-stream"):
                    self._read_events(call, response, deadline)
                else:
                    self._settle(call, orjson.loads(response.read()))
        except httpx.TimeoutException as exc:
            raise MCPError(f"{call.method}: {self.url} did not answer in time") from exc
        except httpx.ConnectError as exc:
            raise MCPError(
                f"{call.method}: cannot connect to {self.url} (is the server running?)"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            raise MCPError(
                f"{call.method}: the connection to {self.url} broke before the answer "
                f"came (the server may have crashed): {type(exc).__name__}"
            ) from exc
        except httpx.HTTPError as exc:
            raise MCPError(
                f"{call.method}: cannot reach {self.url}: {type(exc).__name__}: {exc}"
            ) from exc
        except orjson.JSONDecodeError as exc:
            raise MCPError(f"{call.method}: {self.url} sent invalid JSON") from exc

    def _read_events(
        self, call: Call, response: httpx.Response, deadline: float
    ) -> None:
        decoder = core.SSEDecoder()
        for chunk in response.iter_raw():
            for event in decoder.feed(chunk):
                if event.data:
                    self._settle(call, orjson.loads(event.data))
            if call.done.is_set():
                return
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
                    self.url, headers=self._session_headers(), timeout=CLOSE_WAIT
                ).close()
            self.session_id = None
        if self._own_client:
            self._client.close()
