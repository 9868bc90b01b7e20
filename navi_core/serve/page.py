"""The web chat page ``navi-core serve`` shows at ``/``: one static HTML file."""

from __future__ import annotations

from importlib.resources import files

__all__ = ["chat_page"]


def chat_page() -> bytes:
    """The page's bytes (``chat.html`` beside this module; it calls the JSON API)."""
    return files(__package__).joinpath("chat.html").read_bytes()
