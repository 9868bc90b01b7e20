"""The web chat page ``navi-core serve`` shows at ``/``: one static HTML file."""

from __future__ import annotations

from importlib.resources import files

from .http import Response

__all__ = ["chat_page", "page_response"]


def chat_page() -> bytes:
    """The page's bytes (``chat.html`` beside this module; it calls the JSON API)."""
    return files(__package__).joinpath("chat.html").read_bytes()


def page_response() -> Response:
    """The page as a response, revalidated on every load."""
    body = chat_page()
    headers = [
        ("Content-Type", "text/html; charset=utf-8"),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-cache"),
    ]
    return Response(200, [body], headers)
