"""``navi-core bench``: an agent workload against your own server, measured."""
