"""``ServeApp``: the WSGI application of ``navi-core serve``, and ``make_app``.

Each request is handled on the calling thread with no event loop: a turn is an
``Agent`` opened on the session (which takes the session lock, so a second driver
anywhere gets 409) whose ``Stream`` is pulled into the response body. The routes and
their JSON are in ``openapi.py``; errors are JSON (``http.HTTPError``). Before a
handler runs: without tokens, the ``Host``, the browser's idea of the request's site
and a POST body's type are checked (``guard``); with tokens, a client that keeps
sending wrong ones waits (``throttle``). A failure of the store or the server is a
500 naming an error id; its details go only to the log (``failures``).
"""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Final

from .._logs import get_logger
from ..agent import Agent
from ..codec import to_obj
from ..compaction._compaction import DEFAULT_SUMMARY_PROMPT
from ..config import Config
from ..conversation import ToolUse
from ..errors import (
    AmbiguousSession,
    ApprovalNotPending,
    ProviderError,
    SessionBusy,
    SessionNotFound,
    SteeringQueueFull,
)
from ..providers.base import Provider
from ..store.base import SessionInfo, SessionStore
from ..tools._tool import Tool, ToolSource
from .auth import BearerAuth
from .control import ControlBus, LocalControl
from .failures import INTERNAL, hidden
from .guard import HostGuard, require_json, same_origin
from .http import HTTPError, Request, Response, json_response, only_fields, optional_str
from .openapi import openapi_document
from .page import page_response
from .routes import match_route
from .throttle import AuthThrottle, client_address
from .turns import RunningTurn, TurnRegistry

__all__ = ["ServeApp", "make_app"]

log = get_logger("navi_core.serve")

StartResponse = Callable[..., Any]
ToolLike = Tool | ToolSource | Callable[..., Any]

#: a prompt, system prompt or instruction may be this long
MAX_TEXT = 1_000_000
#: a steering message may be this long
MAX_STEER = 16_384


def session_obj(info: SessionInfo) -> dict[str, Any]:
    """A session as the API shows it."""
    return dataclasses.asdict(info)


class ServeApp:
    """Sessions over HTTP: a WSGI callable; one per worker process.

    Args:
        store: where sessions live (closed by ``close``).
        provider: the model endpoint shared by every turn, or
        provider_factory: a function making one provider per turn (closed after it).
        tools, config, system: what each turn's ``Agent`` gets; ``system`` is the
            system prompt of sessions created without one.
        auth: required bearer tokens; None serves without authentication.
        control: where cancel/steer requests meet the worker driving a session;
            in-process by default, ``SQLiteControl``/``PostgresControl`` across workers.
        max_body: the largest request body accepted, in bytes (413 above).
        hosts: without ``auth``, the ``Host`` names served (421 for others); None
            answers any (an app embedded behind something that checks).
        trusted_proxies: peer addresses whose ``X-Real-IP`` names the client (for
            ``throttle``).
        throttle: how clients sending wrong tokens are paused; a default
            ``AuthThrottle`` with ``auth``.
    """

    def __init__(
        self,
        store: SessionStore,
        provider: Provider | None = None,
        *,
        provider_factory: Callable[[], Provider] | None = None,
        tools: Iterable[ToolLike] = (),
        config: Config | None = None,
        system: str | None = None,
        auth: BearerAuth | None = None,
        control: ControlBus | None = None,
        max_body: int = 1 << 20,
        hosts: Iterable[str] | None = None,
        trusted_proxies: Iterable[str] = (),
        throttle: AuthThrottle | None = None,
    ) -> None:
        if (provider is None) == (provider_factory is None):
            raise ValueError("give a provider or a provider_factory, not both or none")
        self.store = store
        self._provider = provider
        self._provider_factory = provider_factory
        self.tools: Sequence[ToolLike] = tuple(tools)
        self.config = config or Config()
        self.system = system
        self.auth = auth
        self.control: ControlBus = control or LocalControl()
        self.max_body = max_body
        self.hosts = HostGuard(hosts) if hosts is not None and auth is None else None
        self.trusted_proxies = frozenset(trusted_proxies)
        self.throttle = throttle or AuthThrottle()
        self.turns = TurnRegistry()
        self._draining = threading.Event()
        self._handlers: Mapping[str, Callable[..., Response]] = {
            "page": self._page,
            "openapi": self._openapi,
            "list_sessions": self._list_sessions,
            "create_session": self._create_session,
            "get_session": self._get_session,
            "list_messages": self._list_messages,
            "start_turn": self._start_turn,
            "cancel_turn": self._cancel,
            "steer_turn": self._steer,
            "decide_approval": self._approval,
            "compact_session": self._compact,
        }

    # -- WSGI --------------------------------------------------------------------

    def __call__(
        self, environ: dict[str, Any], start_response: StartResponse
    ) -> Iterable[bytes]:
        response = self.handle(environ)
        start_response(response.status_line(), response.headers)
        return response.body

    def handle(self, environ: Mapping[str, Any]) -> Response:
        """The response to one request (errors included)."""
        request = Request(environ, self.max_body)
        try:
            name, params, public, known = match_route(request.method, request.path)
            if self.hosts is not None:
                self.hosts.check(request)
            if not public:
                self._admit(request)
                request.only_query(known)
            return self._handlers[name](request, **params)
        except HTTPError as exc:
            return self._error_response(exc)
        except SessionBusy as exc:
            return HTTPError(409, "session_busy", str(exc)).response()
        except SteeringQueueFull as exc:
            return HTTPError(429, "steering_queue_full", str(exc)).response()
        except (SessionNotFound, AmbiguousSession) as exc:
            return HTTPError(404, "session_not_found", str(exc)).response()
        except ProviderError as exc:  # the model failed; its errors never hold a key
            return HTTPError(502, type(exc).__name__, str(exc)).response()
        except Exception as exc:  # the store, a fault: the details go to the log
            doing = f"{request.method} {request.path[:200]}"
            return HTTPError(500, INTERNAL, hidden(exc, doing)).response()

    def _admit(self, request: Request) -> None:
        """Checks of an API request: without tokens its site and a POST's body type,
        else its token.

        Raises:
            HTTPError: 403 cross-site, 415 not JSON, 429 while its address waits, 401.
        """
        if self.auth is None:
            same_origin(request)
            if request.method == "POST":
                require_json(request)
            return
        address = client_address(request.environ, self.trusted_proxies)
        wait = self.throttle.wait(address)
        if wait > 0:
            raise self._throttled(wait)
        header = request.header("Authorization")
        if self.auth.allows(header):
            self.throttle.succeeded(address)
            return
        if header is not None:  # a wrong token, not a missing one
            wait = self.throttle.failed(address)
            if wait > 0:
                raise self._throttled(wait)
        raise HTTPError(401, "unauthorized", "a valid bearer token is needed")

    @staticmethod
    def _throttled(wait: float) -> HTTPError:
        exc = HTTPError(
            429,
            "too_many_wrong_tokens",
            f"too many wrong tokens from this address: retry in {math.ceil(wait)} s",
        )
        exc.headers.append(("Retry-After", str(math.ceil(wait))))
        return exc

    @staticmethod
    def _error_response(exc: HTTPError) -> Response:
        if exc.status == 405:  # the route table names the allowed methods
            allowed, exc.field = exc.field or "", None
            exc.headers.append(("Allow", allowed))
        if exc.status == 401:
            exc.headers.append(("WWW-Authenticate", 'Bearer realm="navi"'))
        return exc.response()

    # -- life cycle ----------------------------------------------------------------

    @property
    def draining(self) -> bool:
        """True once ``begin_shutdown`` was called: new turns get 503."""
        return self._draining.is_set()

    def begin_shutdown(self, grace: float) -> None:
        """Refuse new turns; cancel the running ones after ``grace`` seconds.

        A cancelled turn ends with ``TurnComplete(CANCELLED)`` and keeps what it
        committed; the server then lets its response finish.
        """
        if not self._draining.is_set():
            self._draining.set()
            self.turns.cancel_all_after(grace, "the server is shutting down")

    def close(self) -> None:
        """Close the store, the control bus and the shared provider."""
        try:
            self.control.close()
        finally:
            try:
                if self._provider is not None:
                    self._provider.close()
            finally:
                self.store.close()

    # -- helpers -------------------------------------------------------------------

    def _session(self, session_id: str) -> SessionInfo:
        info = self.store.get(session_id)
        if info.id != session_id:  # the API names sessions by full id only
            raise SessionNotFound(f"no session {session_id!r}")
        return info

    def _agent(self, session_id: str, provider: Provider, **kw: Any) -> Agent:
        self._session(session_id)
        return Agent(
            provider,
            tools=self.tools,
            store=self.store,
            session=session_id,
            config=kw.get("config", self.config),
        )

    def _open_provider(self) -> tuple[Provider, bool]:
        """The provider of one request, and whether the request must close it."""
        if self._provider is not None:
            return self._provider, False
        assert self._provider_factory is not None
        return self._provider_factory(), True

    def _busy(self, session_id: str) -> bool:
        """True when some driver, in any worker, holds the session."""
        try:
            lock = self.store.lock(session_id)
        except SessionBusy:
            return True
        lock.release()
        return False

    # -- handlers ------------------------------------------------------------------

    def _page(self, request: Request) -> Response:
        return page_response()

    def _openapi(self, request: Request) -> Response:
        return json_response(openapi_document())

    def _list_sessions(self, request: Request) -> Response:
        limit = request.query_int("limit", 50, 1, 256)
        start = request.query_int("cursor", 0, 0, 1 << 62)
        sessions = self.store.list()
        page = sessions[start : start + limit]
        more = start + limit < len(sessions)
        return json_response(
            {
                "sessions": [session_obj(s) for s in page],
                "next_cursor": str(start + limit) if more else None,
            }
        )

    def _create_session(self, request: Request) -> Response:
        body = request.json_object()
        only_fields(body, ("system",))
        system = optional_str(body, "system", MAX_TEXT)
        if system is None:
            system = self.system
        info = self.store.create()
        if system is not None:
            provider, owned = self._open_provider()
            try:
                with Agent(provider, store=self.store, session=info.id) as agent:
                    agent.add_system_message(system)
            finally:
                if owned:
                    provider.close()
            info = self.store.get(info.id)
        return json_response(session_obj(info), 201)

    def _get_session(self, request: Request, session_id: str) -> Response:
        return json_response(session_obj(self._session(session_id)))

    def _list_messages(self, request: Request, session_id: str) -> Response:
        limit = request.query_int("limit", 100, 1, 256)
        start = request.query_int("cursor", 0, 0, 1 << 62)
        self._session(session_id)
        page = self.store.history_page(
            session_id, limit=limit, cursor=str(start) if start else None
        )
        messages, next_cursor = list(page.messages), page.next_cursor
        return json_response(
            {"messages": [to_obj(m) for m in messages], "next_cursor": next_cursor}
        )

    def _start_turn(self, request: Request, session_id: str) -> Response:
        body = request.json_object()
        only_fields(body, ("prompt",))
        prompt = optional_str(body, "prompt", MAX_TEXT)
        if self.draining:
            raise HTTPError(503, "shutting_down", "the server is shutting down")
        provider, owned = self._open_provider()
        try:
            agent = self._agent(session_id, provider)
        except BaseException:
            if owned:
                provider.close()
            raise
        try:
            waiting = [t for k, t in self.control.take(session_id) if k == "steer"]
            for i, text in enumerate(waiting):  # left while no turn ran: apply them
                try:
                    agent.steer(text)
                except SteeringQueueFull:  # keep the rest for a later turn
                    for rest in waiting[i:]:
                        self.control.post(session_id, "steer", rest)
                    break
            stream = agent.run(prompt) if prompt is not None else agent.resume()
        except BaseException:
            agent.close()
            if owned:
                provider.close()
            raise

        def ended(turn: RunningTurn) -> None:
            self.turns.remove(turn)
            if owned:
                provider.close()

        turn = RunningTurn(agent, stream, self.control, ended)
        self.turns.add(turn)
        return turn.response(request.environ.get("gunicorn.socket"))

    def _cancel(self, request: Request, session_id: str) -> Response:
        only_fields(request.json_object(), ())
        self._session(session_id)
        turn = self.turns.get(session_id)
        if turn is not None:
            turn.cancel("cancel requested")
            return json_response({"running": True}, 202)
        if self._busy(session_id):
            self.control.post(session_id, "cancel", limit=1)  # one is enough
            return json_response({"running": True}, 202)
        return json_response({"running": False})

    def _steer(self, request: Request, session_id: str) -> Response:
        body = request.json_object()
        only_fields(body, ("text",))
        text = optional_str(body, "text", MAX_STEER)
        if not text:
            raise HTTPError(
                400, "bad_request", "text must be a non-empty string", "text"
            )
        self._session(session_id)
        turn = self.turns.get(session_id)
        if turn is not None:
            disposition = turn.steer(text)
            return json_response({"disposition": disposition.value}, 202)
        running = self._busy(session_id)
        limit = self.config.max_steering
        if not self.control.post(session_id, "steer", text, limit=limit):
            raise SteeringQueueFull(
                f"{limit} steering messages wait already for session {session_id}"
            )
        return json_response({"disposition": "queued" if running else "next_turn"}, 202)

    def _approval(self, request: Request, session_id: str, call_id: str) -> Response:
        body = request.json_object()
        only_fields(body, ("approved", "reason", "call"))
        approved = body.get("approved")
        if not isinstance(approved, bool):
            raise HTTPError(
                400, "bad_request", "approved must be true or false", "approved"
            )
        reason = optional_str(body, "reason", 10_000) or ""
        call = _call_named(call_id, body)
        provider, owned = self._open_provider()
        try:
            with self._agent(session_id, provider) as agent:
                try:
                    if approved:
                        agent.approve(call)
                    else:
                        agent.deny(call, reason=reason)
                except ApprovalNotPending as exc:  # nothing held, or decided already
                    raise HTTPError(409, "approval_not_pending", str(exc)) from None
        finally:
            if owned:
                provider.close()
        return json_response({"call_id": call_id, "approved": approved})

    def _compact(self, request: Request, session_id: str) -> Response:
        body = request.json_object()
        only_fields(body, ("instructions", "keep_turns"))
        instructions = optional_str(body, "instructions", MAX_TEXT)
        keep_turns = _whole_number(body.get("keep_turns"), "keep_turns")
        config = self.config
        if config.compaction.prompt is None:
            compaction = dataclasses.replace(
                config.compaction, prompt=DEFAULT_SUMMARY_PROMPT
            )
            config = dataclasses.replace(config, compaction=compaction)
        provider, owned = self._open_provider()
        try:
            with self._agent(session_id, provider, config=config) as agent:
                result = agent.compact(instructions, keep_turns)
        finally:
            if owned:
                provider.close()
        return json_response(dataclasses.asdict(result))


#: the embeddable factory: ``make_app(store, provider, tools=..., auth=...)``
make_app: Final = ServeApp


def _call_named(call_id: str, body: Mapping[str, Any]) -> ToolUse | str:
    """What a decision names: the call id (or an ``Approval.key``) alone, or, with
    ``call: {tool, input}`` from ``TurnComplete.pending_approvals``, the call with that
    content, so a decision never lands on a later call that reuses the id."""
    call = body.get("call")
    if call is None:
        return call_id
    if not isinstance(call, dict):
        raise HTTPError(400, "bad_request", "call must be an object", "call")
    only_fields(call, ("tool", "input"))
    tool = optional_str(call, "tool", 1_000)
    raw = optional_str(call, "input", 1_000_000)
    if tool is None or raw is None:
        raise HTTPError(
            400, "bad_request", "call names the held call by its tool and input", "call"
        )
    return ToolUse(call_id, tool, raw)


def _whole_number(value: Any, field: str) -> int | None:
    """A JSON integer >= 0 (``2.0`` is one, as JSON Schema says), or None; else 400."""
    if value is None:
        return None
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        raise HTTPError(
            400, "bad_request", f"{field} must be a whole number >= 0", field
        )
    return value
