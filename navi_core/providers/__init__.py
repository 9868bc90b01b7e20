"""Model providers: the seam, OpenAI-compatible chat, Anthropic and the offline Scripted."""

from __future__ import annotations

from ..tools._tool import ToolSpec
from .base import Provider, ProviderRequest, ProviderStream
from .scripted import Scripted

__all__ = ["Provider", "ProviderRequest", "ProviderStream", "Scripted", "ToolSpec"]
