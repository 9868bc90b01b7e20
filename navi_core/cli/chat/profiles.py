"""Chat profiles: named endpoint settings in a TOML file, merged with the flags.

The file is ``$XDG_CONFIG_HOME/navi-core/config.toml`` (``~/.config/...``) or the one
``--config`` names::

    default_profile = "local"

    [profiles.local]
    provider = "openai"            # openai | anthropic | responses
    model = "qwen2.5"
    base_url = "http://127.0.0.1:11434/v1"
    api_key_env = "MY_SERVER_KEY"  # only for a server that needs a key (Ollama does not)
    system = "You answer briefly."
    tools = ["workspace"]          # "workspace" or "package.module:attribute"
    workspace = "~/src/project"    # the file tools' folder (default: the current one)
    price = { input = 0.15, output = 0.60 }   # USD per million tokens
    max_tokens = 2048              # cap on each answer's output
    temperature = 0.2
    extra_body = { top_p = 0.9 }   # merged into every request body
    mcp_config = "~/.config/navi-core/mcp.json"   # {"mcpServers": {...}}

Every key is optional but ``model`` (or ``--model``). A flag given on the command line
wins over the profile. A key written into the file (``api_key``) is refused: the file
is often shared, the environment is not.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from ...config import Pricing
from ...conversation import Usage
from ...tools._tool import Tool, ToolSource
from ..options import UsageError

__all__ = [
    "PROVIDERS",
    "ChatSettings",
    "Price",
    "default_config_path",
    "load_profile",
    "load_tools",
]

#: the ``provider`` values a profile may name
PROVIDERS = ("openai", "anthropic", "responses")
_KEYS = {
    "provider",
    "model",
    "base_url",
    "api_key_env",
    "system",
    "tools",
    "workspace",
    "price",
    "db",
    "max_tokens",
    "temperature",
    "extra_body",
    "mcp_config",
}
_PRICE_KEYS = {"input", "output", "cache_read", "cache_write"}


@dataclass(frozen=True, slots=True)
class Price(Pricing):
    """A profile's ``price``: a ``Pricing`` (USD per million tokens; the cache buckets
    cost ``input`` unless priced) that also gives its cost as a plain number."""

    def cost(self, usage: Usage) -> float:
        """What ``usage`` costs in USD."""
        return self.cost_of(usage).usd


@dataclass(frozen=True, slots=True)
class ChatSettings:
    """Everything a chat needs to open its provider and agent (never a key)."""

    provider: str = "openai"
    model: str | None = None
    base_url: str | None = None
    api_key_env: str | None = None
    system: str | None = None
    tools: tuple[str, ...] = ()
    workspace: Path | None = None
    price: Price | None = None
    db: str | None = None
    profile: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    extra_body: Mapping[str, Any] = field(default_factory=dict)
    mcp_config: Path | None = None

    def with_model(self, model: str) -> ChatSettings:
        """The same settings for another model (``/model NAME``)."""
        return replace(self, model=model)


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """``$XDG_CONFIG_HOME/navi-core/config.toml``, else ``~/.config/navi-core/...``."""
    env = os.environ if environ is None else environ
    base = env.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "navi-core" / "config.toml"


def _read(path: Path) -> dict[str, Any]:
    # loaded here, where a file is read: a command that reads no profile (--version,
    # demo, run) never imports it, and on Python 3.10 runs without tomli
    if sys.version_info >= (3, 11):
        import tomllib
    else:  # pragma: no cover - Python 3.10: tomli, a dependency there
        try:
            import tomli as tomllib
        except ImportError:
            raise UsageError(
                f"{path}: reading a profile needs tomli on Python 3.10: "
                "pip install 'tomli>=2'"
            ) from None
    try:
        with path.open("rb") as f:
            return tomllib.load(f)
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{path}: not valid TOML: {exc}") from None
    except OSError as exc:
        raise UsageError(f"{path}: {exc.strerror or exc}") from None


def _price(name: str, raw: object) -> Price:
    if not isinstance(raw, dict) or not {"input", "output"} <= raw.keys():
        raise UsageError(f"profile {name!r}: price needs input and output (USD/Mtok)")
    unknown = raw.keys() - _PRICE_KEYS
    if unknown:
        raise UsageError(f"profile {name!r}: unknown price keys {sorted(unknown)}")
    try:
        values = {k: float(v) for k, v in raw.items()}
    except (TypeError, ValueError):
        raise UsageError(f"profile {name!r}: prices must be numbers") from None
    return Price(**values)


def _settings(name: str, raw: Mapping[str, Any], base: Path) -> ChatSettings:
    if "api_key" in raw:
        raise UsageError(
            f"profile {name!r} holds an api_key: put the key in an environment "
            "variable and name that variable with api_key_env"
        )
    unknown = raw.keys() - _KEYS
    if unknown:
        raise UsageError(f"profile {name!r}: unknown keys {sorted(unknown)}")
    provider = str(raw.get("provider", "openai"))
    if provider not in PROVIDERS:
        raise UsageError(
            f"profile {name!r}: provider must be one of {', '.join(PROVIDERS)}, "
            f"not {provider!r}"
        )
    tools = raw.get("tools", [])
    if not isinstance(tools, list) or not all(isinstance(t, str) for t in tools):
        raise UsageError(f"profile {name!r}: tools must be a list of strings")
    workspace = raw.get("workspace")
    ws = None
    if workspace is not None:
        ws = (base / Path(str(workspace)).expanduser()).resolve()
    strings: dict[str, Any] = {
        k: str(raw[k])
        for k in ("model", "base_url", "api_key_env", "system", "db")
        if k in raw
    }
    mcp = raw.get("mcp_config")
    return ChatSettings(
        provider=provider,
        tools=tuple(tools),
        workspace=ws,
        price=_price(name, raw["price"]) if "price" in raw else None,
        profile=name,
        mcp_config=(base / Path(str(mcp)).expanduser()) if mcp is not None else None,
        **_request(name, raw),
        **strings,
    )


def _request(name: str, raw: Mapping[str, Any]) -> dict[str, Any]:
    """The profile's ``max_tokens``, ``temperature`` and ``extra_body``, checked."""
    out: dict[str, Any] = {}
    tokens = raw.get("max_tokens")
    if tokens is not None:
        if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
            raise UsageError(f"profile {name!r}: max_tokens must be a whole number ≥ 1")
        out["max_tokens"] = tokens
    temperature = raw.get("temperature")
    if temperature is not None:
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise UsageError(f"profile {name!r}: temperature must be a number")
        if not 0 <= temperature <= 2:
            raise UsageError(f"profile {name!r}: temperature must be between 0 and 2")
        out["temperature"] = float(temperature)
    extra = raw.get("extra_body")
    if extra is not None:
        if not isinstance(extra, dict):
            raise UsageError(f"profile {name!r}: extra_body must be a table")
        out["extra_body"] = dict(extra)
    return out


def load_profile(
    path: Path | None, name: str | None, *, explicit_path: bool = False
) -> ChatSettings:
    """The settings of profile ``name`` (or the file's default one) in ``path``.

    A missing file is no error unless it was named with ``--config`` or a profile was
    asked for; then it is one, as are an unknown profile and a malformed entry.

    Raises:
        UsageError: the file or the profile cannot be used; the message says why.
    """
    if path is None or not path.exists():
        if explicit_path or name is not None:
            where = path if path is not None else "the config file"
            raise UsageError(f"{where}: no such file (needed for --profile/--config)")
        return ChatSettings()
    data = _read(path)
    profiles = data.get("profiles", {})
    if not isinstance(profiles, dict):
        raise UsageError(f"{path}: [profiles] must be a table of tables")
    chosen = name or data.get("default_profile")
    if chosen is None:
        if len(profiles) != 1:
            return ChatSettings()
        chosen = next(iter(profiles))
    raw = profiles.get(str(chosen))
    if not isinstance(raw, dict):
        known = ", ".join(sorted(profiles)) or "none"
        raise UsageError(f"{path}: no profile {chosen!r} (profiles: {known})")
    return _settings(str(chosen), raw, path.parent)


def load_tools(
    names: tuple[str, ...], workspace: Path | None
) -> list[Tool | ToolSource]:
    """The tools a profile names: ``workspace`` or ``module:attribute`` entries.

    The attribute may be a ``Tool``, a ``ToolSource``, a typed function, or a list of
    them. Raises ``UsageError`` naming the entry that cannot be loaded.
    """
    from ...tools._tool import tool as as_tool
    from ..workspace import workspace_tools

    out: list[Tool | ToolSource] = []
    for entry in names:
        if entry == "workspace":
            out.extend(workspace_tools(workspace or Path.cwd()))
            continue
        module_name, _, attr = entry.partition(":")
        if not module_name or not attr:
            raise UsageError(f"tool {entry!r}: write 'workspace' or 'module:attribute'")
        try:
            value = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as exc:
            raise UsageError(f"tool {entry!r} cannot be loaded: {exc}") from None
        for item in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(item, (Tool, ToolSource)):
                out.append(item)
            elif callable(item):
                out.append(as_tool(item))
            else:
                raise UsageError(f"tool {entry!r}: {type(item).__name__} is no tool")
    return out
