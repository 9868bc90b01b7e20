"""The route table of ``navi-core serve``: (method, path pattern) -> handler name.

Path segments in braces are parameters; ``public`` routes need no bearer token (the
chat page and the OpenAPI document hold nothing secret). ``query`` names the query
parameters an API route takes: any other is a 400 naming it, so a misspelt
``?limt=5`` is not silently ignored. ``long`` routes (a compaction) may hold their
thread for minutes: the worker runs them on threads of their own. A ``streamed``
route (a turn) answers at once with a body that streams for long: the worker calls
its handler as soon as the request is read, so the turn is accepted (its prompt
stored, the session held) and can be cancelled or steered while its body waits for
one of those threads.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Final, Literal, NamedTuple
from urllib.parse import unquote

from .http import HTTPError

__all__ = ["ROUTES", "Route", "match_route", "route_kind"]


class Route(NamedTuple):
    method: str
    pattern: str
    name: str
    public: bool = False
    query: tuple[str, ...] = ()
    long: bool = False
    streamed: bool = False


_PAGED = ("limit", "cursor")


ROUTES: Final = (
    Route("GET", "/", "page", public=True),
    Route("GET", "/openapi.json", "openapi", public=True),
    Route("GET", "/v1/sessions", "list_sessions", query=_PAGED),
    Route("POST", "/v1/sessions", "create_session"),
    Route("GET", "/v1/sessions/{session_id}", "get_session"),
    Route("GET", "/v1/sessions/{session_id}/messages", "list_messages", query=_PAGED),
    Route("POST", "/v1/sessions/{session_id}/turns", "start_turn", streamed=True),
    Route("POST", "/v1/sessions/{session_id}/cancel", "cancel_turn"),
    Route("POST", "/v1/sessions/{session_id}/steer", "steer_turn"),
    Route("POST", "/v1/sessions/{session_id}/approvals/{call_id}", "decide_approval"),
    Route("POST", "/v1/sessions/{session_id}/compact", "compact_session", long=True),
)

_SPLIT: Final = MappingProxyType(
    {r.pattern: tuple(r.pattern.strip("/").split("/")) for r in ROUTES}
)


def _match(pattern: str, parts: tuple[str, ...]) -> dict[str, str] | None:
    want = _SPLIT[pattern]
    if pattern == "/":
        return {} if parts == ("",) else None
    if len(want) != len(parts):
        return None
    params = {}
    for w, p in zip(want, parts, strict=True):
        if w.startswith("{"):
            if not p:
                return None
            params[w[1:-1]] = unquote(p)
        elif w != p:
            return None
    return params


def match_route(
    method: str, path: str
) -> tuple[str, dict[str, str], bool, tuple[str, ...]]:
    """(handler name, path parameters, public, query parameter names) of the request.

    Raises:
        HTTPError: 404 for an unknown path, 405 (``field`` holds the allowed methods)
            for a known path with another method.
    """
    parts = tuple(path.strip("/").split("/")) if path.strip("/") else ("",)
    allowed = []
    for route in ROUTES:
        params = _match(route.pattern, parts)
        if params is None:
            continue
        if route.method == method:
            return route.name, params, route.public, route.query
        allowed.append(route.method)
    if allowed:
        raise HTTPError(
            405,
            "method_not_allowed",
            f"{method} is not allowed here",
            ", ".join(allowed),
        )
    raise HTTPError(404, "not_found", f"no route {path[:200]!r}")


def route_kind(method: str, target: str) -> Literal["short", "long", "streamed"]:
    """Whether the request line's ``method`` and ``target`` (a path with its query, or
    an absolute URL) name a ``long`` route, a ``streamed`` one, or neither."""
    if "://" in target.split("?", 1)[0]:
        target = "/" + target.split("://", 1)[1].partition("/")[2]
    path = target.split("?", 1)[0]
    parts = tuple(path.strip("/").split("/")) if path.strip("/") else ("",)
    for r in ROUTES:
        if r.method == method and _match(r.pattern, parts) is not None:
            return "streamed" if r.streamed else "long" if r.long else "short"
    return "short"
