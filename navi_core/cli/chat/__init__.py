"""``navi-core chat``: an interactive terminal chat."""
