"""MCP over streamable HTTP: each request is one POST, answered by JSON or SSE.

Each request of a batch is posted on a thread of its own, so the calls overlap as they
do over stdio; the event-stream answers are read with the core's ``SSEDecoder``. The
URL is shown only in its public form, and the credentials the requests carry (headers,
URL user info, secret query values, a proxy's credentials) are redacted from everything
the server, or a proxy on the way, says before it becomes an error or a result.
"""

from __future__ import annotations

import base64
import contextlib
import math
import re
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any, Final

import httpx
import orjson

from .. import core
from .._logs import protect
from .._secrets import clip, environment_proxy, public_url, redact, request_secrets
from ._listen import Listener, socket_stopper
from ._wire import (
    CLOSE_WAIT,
    MAX_MESSAGE_BYTES,
    Call,
    MCPError,
    Progress,
    ServerRequests,
    answer_bytes,
    notification_bytes,
    request_bytes,
    scrubbed,
)

__all__ = ["HTTPTransport", "header_arguments"]

#: bytes of an error answer read for its message (the message is cut far shorter)
_ERROR_BYTES: Final = 64 * 1024
#: characters of an error answer's text put in the error
_ERROR_CHARS: Final = 300
#: the parameter a request of the 2026-07-28 revision mirrors in ``mcp-name``
_NAMED: Final = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}
_HEADER_SAFE: Final = re.compile(r"[\x20-\x7e]*")


class HTTPTransport:
    """A streamable HTTP endpoint: each request is a POST answered by JSON or SSE.

    The ``mcp-session-id`` the server hands out in the initialize answer is sent back
    on every later request, with ``mcp-protocol-version`` once it is known; ``close()``
    ends the session with a DELETE. With ``stateless`` (the 2026-07-28 revision) there
    is no session: each request carries ``mcp-method`` (and ``mcp-name``) headers, and
    a cancelled call's answer is closed. Requests the server sends inside an answer's
    event stream go to ``on_request`` and are answered with a POST. ``url`` is the public form of the endpoint;
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
        auth: httpx.Auth | None = None,
    ) -> None:
        self.url = public_url(url)
        self._url = url
        self._own_client = client is None
        self._client = client or httpx.Client(timeout=httpx.Timeout(30.0), auth=auth)
        #: the tool calls of the 2026-07-28 revision, each on a connection of its own:
        #: the server answers only when the tool is done, and closing the connection
        #: is how that revision cancels, so it must be known before the answer starts
        self._calls_client = (
            httpx.Client(
                timeout=httpx.Timeout(30.0),
                auth=auth,
                limits=httpx.Limits(max_keepalive_connections=0),
            )
            if client is None
            else client
        )
        self._headers = {
            **(headers or {}),
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        # with the credentials of the proxies the requests may go through
        self._fixed_secrets = request_secrets(
            self._headers, url, self.url, self._client
        )
        protect(self._fixed_secrets)  # httpx logs each request
        self._auth = auth
        self._max = max_message_bytes
        self._lock = threading.Lock()
        self._next_id = 0
        self._closed = False
        self.session_id: str | None = None
        self.protocol_version: str | None = None
        self.stateless = False
        #: server tool name -> {argument path: token} of its ``x-mcp-header``
        #: arguments, mirrored as ``Mcp-Param-<token>`` headers (2026-07-28)
        self.param_headers: dict[str, dict[tuple[str, ...], str]] = {}
        self.on_request: ServerRequests | None = None
        self.on_notify: Callable[[str, Mapping[str, Any]], None] | None = None
        self._listener: Listener | None = None

    def __repr__(self) -> str:
        return f"<HTTPTransport {self.url!r}>"

    @property
    def secrets(self) -> tuple[str, ...]:
        """The credentials requests carry: headers, the URL's, and those an ``auth``
        holds now (``OAuth.secrets``: its tokens change as they are refreshed)."""
        held: tuple[str, ...] = tuple(getattr(self._auth, "secrets", ()))
        return (*held, *self._fixed_secrets) if held else self._fixed_secrets

    @property
    def alive(self) -> bool:
        return not self._closed

    @property
    def max_message_bytes(self) -> int:
        return self._max

    @property
    def listen_client(self) -> httpx.Client:
        """The client of the long-lived stream: a connection of its own, not kept
        alive, so shutting its socket down ends nothing else."""
        return self._calls_client

    @property
    def listening(self) -> bool:
        """Whether the stream of what relates to no request is open now."""
        return self._listener is not None and self._listener.listening

    def next_id(self) -> int:
        with self._lock:
            self._next_id += 1
            return self._next_id

    def listen(
        self,
        subscribe: Mapping[str, Any] | None,
        on_reopen: Callable[[], None],
    ) -> None:
        """Keep the server's stream of what relates to no request open on a daemon
        thread (``_listen``): the standalone GET stream, or with ``subscribe`` (the
        params of a ``subscriptions/listen`` request, 2026-07-28) that request's."""
        if self._closed or self._listener is not None:
            return
        self._listener = Listener(self, subscribe, on_reopen)
        self._listener.start()

    def unsolicited(self, item: dict[str, Any]) -> None:
        """A message of the long-lived stream: a notification goes to
        ``on_notify``, a request of the server's is answered with a POST (under the
        handshake: 2026-07-28 servers send none, and clients send no answers)."""
        method = item.get("method")
        if not isinstance(method, str):
            return  # an answer: no request of ours is waiting on this stream
        if "id" in item:
            if not self.stateless:
                threading.Thread(target=self._reply, args=(item,), daemon=True).start()
        elif method != "notifications/progress" and self.on_notify is not None:
            raw = item.get("params")
            self.on_notify(method, raw if isinstance(raw, dict) else {})

    @property
    def endpoint(self) -> str:
        """The endpoint's URL (it may hold credentials: never shown as it is)."""
        return self._url

    def session_headers(self) -> dict[str, str]:
        headers = dict(self._headers)
        if self.session_id is not None:
            headers["mcp-session-id"] = self.session_id
        if self.protocol_version is not None:
            headers["mcp-protocol-version"] = self.protocol_version
        return headers

    def start(
        self,
        method: str,
        params: Mapping[str, Any] | None,
        deadline: float,
        progress: Progress | None = None,
    ) -> Call:
        """POST the request on a thread of its own, so a batch's calls overlap.

        ``deadline`` bounds each wait for the server (a progress notification or any
        other event of the answer starts a new wait).
        """
        with self._lock:
            self._next_id += 1
            call = Call(self._next_id, method, self.secrets, progress)
        body = request_bytes(call.id, method, params, progress is not None)
        headers = self.session_headers()
        if self.stateless:
            headers["mcp-method"] = method
            named = (params or {}).get(_NAMED.get(method, ""))
            if isinstance(named, str):
                headers["mcp-name"] = _header_value(named)
                if method == "tools/call" and named in self.param_headers:
                    arguments = (params or {}).get("arguments") or {}
                    headers.update(_mirrored(self.param_headers[named], arguments))
        idle = max(0.001, deadline - time.monotonic())
        if method == "initialize":  # the session id it brings is needed by the rest
            self._post(call, body, headers, idle)
        else:
            threading.Thread(
                target=self._post, args=(call, body, headers, idle), daemon=True
            ).start()
        return call

    def cancel(self, call: Call, reason: str) -> None:
        if not call.done.is_set() and not self.stateless:
            params = {"requestId": call.id, "reason": reason}
            threading.Thread(
                target=self.notify,
                args=("notifications/cancelled", params),
                daemon=True,
            ).start()
        call.fail(MCPError(f"{call.method}: {reason}"))
        if call.stop is not None:
            with contextlib.suppress(Exception):
                call.stop()

    def wait(self, call: Call, deadline: float) -> Any:
        # the POST has the same deadline: a little grace lets it report its own error
        if not call.done.wait(max(0.0, deadline - time.monotonic()) + 0.5):
            raise MCPError(f"{call.method}: {self.url} did not answer in time")
        if call.error is not None:
            raise call.error
        return call.result

    def notify(self, method: str, params: Mapping[str, Any] | None = None) -> None:
        self._send(notification_bytes(method, params))

    def _send(self, body: bytes) -> None:
        """POST a message that has no answer (a notification, or an answer of ours)."""
        with contextlib.suppress(httpx.HTTPError, RuntimeError):
            self._client.post(
                self._url,
                content=body,
                headers=self.session_headers(),
                timeout=CLOSE_WAIT * 5,
            ).close()

    def _post(
        self, call: Call, body: bytes, headers: dict[str, str], idle: float
    ) -> None:
        try:
            self._exchange(call, body, headers, idle)
        except MCPError as exc:
            call.fail(exc)
        except Exception as exc:  # never a silent thread death: the call waits on it
            call.fail(MCPError(f"{call.method}: {type(exc).__name__} at {self.url}"))
        if not call.done.is_set():
            call.fail(MCPError(f"{call.method}: {self.url} sent no answer"))

    def _exchange(
        self, call: Call, body: bytes, headers: dict[str, str], idle: float
    ) -> None:
        if call.done.is_set():  # cancelled before it was sent
            return
        supervised = call.method == "tools/call"
        own = supervised and self.stateless and self._own_client
        client = self._calls_client if own else self._client
        try:
            with client.stream(
                "POST",
                self._url,
                content=body,
                headers=headers,
                # a call's reads wait on a person or a model when the server asks
                # mid-call; MCPTools' own idle watch ends a call that hangs
                timeout=httpx.Timeout(idle, read=None if supervised else idle),
                extensions={"trace": _connected(call)} if own else None,
            ) as response:
                call.stop = _stopper(response)
                call.secrets = self.secrets  # with a token the auth just obtained
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
                    self._read_events(call, response, math.inf if supervised else idle)
                else:
                    self._settle(call, orjson.loads(self._read(call, response)))
        except httpx.TimeoutException as exc:
            raise self._failed(
                exc, f"{call.method}: {self.url} did not answer in time"
            ) from exc
        except httpx.ConnectError as exc:
            proxy = environment_proxy(self.url) if self._own_client else None
            where = (
                f"the proxy {proxy} (for {self.url}; NO_PROXY can exempt its host)"
                if proxy
                else f"{self.url} (is the server running?)"
            )
            raise self._failed(
                exc, f"{call.method}: cannot connect to {where}"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError) as exc:
            if call.done.is_set():  # closed by ``cancel``
                return
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
        error = MCPError(
            f"{call.method}: HTTP {response.status_code} from {self.url}: {text}"
        )
        with contextlib.suppress(orjson.JSONDecodeError, AttributeError):
            detail = orjson.loads(raw).get("error") or {}  # a JSON-RPC error answer
            if isinstance(detail.get("code"), int):
                error.code = detail["code"]
                error.data = scrubbed(detail.get("data"), self.secrets)
        return error

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

    def _read_events(self, call: Call, response: httpx.Response, idle: float) -> None:
        """Settle ``call`` from the event stream; an event growing past
        ``max_message_bytes`` or ``idle`` seconds without progress fails it."""
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
            if time.monotonic() > call.touched + idle:
                raise MCPError(f"{call.method}: {self.url} did not answer in time")
        for event in decoder.close():
            if event.data:
                self._settle(call, orjson.loads(event.data))

    def _settle(self, call: Call, message: Any) -> None:
        for item in message if isinstance(message, list) else [message]:
            if not isinstance(item, dict):
                continue
            method = item.get("method")
            raw = item.get("params")
            params: dict[str, Any] = raw if isinstance(raw, dict) else {}
            if method is None:
                if item.get("id") == call.id:
                    call.settle(item)
            elif "id" in item:  # a request of the server's, answered with a POST
                threading.Thread(target=self._reply, args=(item,), daemon=True).start()
            elif method == "notifications/progress":
                if params.get("progressToken") == call.id:
                    call.progress(params)
            elif self.on_notify is not None:
                self.on_notify(method, params)

    def _reply(self, message: dict[str, Any]) -> None:
        self._send(answer_bytes(message["id"], self.on_request, message, self.secrets))

    def close(self) -> None:
        if self._listener is not None:
            self._listener.close()
        if self._closed and self.session_id is None:
            return
        self._closed = True
        if self.session_id is not None:
            with contextlib.suppress(httpx.HTTPError):
                self._client.delete(
                    self._url, headers=self.session_headers(), timeout=CLOSE_WAIT
                ).close()
            self.session_id = None
        if self._own_client:
            self._client.close()
            self._calls_client.close()


def _header_value(value: str) -> str:
    """``value`` as an HTTP header value: as it is when plain printable ASCII, else
    in the revision's ``=?base64?...?=`` form."""
    wrapped = value.startswith("=?base64?") and value.endswith("?=")
    if _HEADER_SAFE.fullmatch(value) and value == value.strip() and not wrapped:
        return value
    return f"=?base64?{base64.b64encode(value.encode()).decode('ascii')}?="


def _connected(call: Call) -> Callable[[str, Mapping[str, Any]], None]:
    """An httpcore trace hook that sets ``call.stop`` as soon as the call's own
    connection is open, before any answer: a call cancelled while the server works
    (and has sent nothing yet) is closed too, and the server sees the client leave."""

    def trace(event: str, info: Mapping[str, Any]) -> None:
        if event not in (
            "connection.connect_tcp.complete",
            "connection.start_tls.complete",
        ):
            return
        stream = info.get("return_value")
        if stream is None:
            return
        call.stop = socket_stopper(stream)
        if call.done.is_set():  # cancelled while it connected
            call.stop()

    return trace


def _stopper(response: httpx.Response) -> Callable[[], None]:
    """Ends ``response`` from another thread: its socket is shut down, so the read
    waiting on it returns at once and the server sees the client leave."""
    return socket_stopper(response.extensions.get("network_stream"))


def header_arguments(schema: Any) -> dict[tuple[str, ...], str]:
    """The arguments of an input schema marked ``x-mcp-header``: path -> token
    (reached through ``properties`` alone, as the revision allows)."""
    out: dict[tuple[str, ...], str] = {}
    stack: list[tuple[tuple[str, ...], Any]] = [((), schema)]
    while stack:
        path, node = stack.pop()
        if not isinstance(node, dict):
            continue
        if path and isinstance(node.get("x-mcp-header"), str):
            out[path] = node["x-mcp-header"]
        properties = node.get("properties")
        if isinstance(properties, dict):
            stack.extend(((*path, k), v) for k, v in properties.items())
    return out


_TOKEN = re.compile(r"[A-Za-z0-9_-]{1,64}")


def _mirrored(tokens: Mapping[tuple[str, ...], str], arguments: Any) -> dict[str, str]:
    """The ``Mcp-Param-*`` headers of a call's arguments."""
    headers: dict[str, str] = {}
    for path, token in tokens.items():
        if not _TOKEN.fullmatch(token):  # a header name of the server's choosing
            continue
        value = arguments
        for key in path:
            value = value.get(key) if isinstance(value, dict) else None
        if isinstance(value, bool):
            rendered = "true" if value else "false"
        elif isinstance(value, (str, int, float)):
            rendered = str(value)
        else:
            continue
        headers[f"Mcp-Param-{token}"] = _header_value(rendered)
    return headers
