"""Model providers: the seam, OpenAI-compatible chat, Anthropic and the offline Scripted."""

from __future__ import annotations

from .base import Provider, ProviderRequest, ProviderStream, ToolSpec
from .scripted import Scripted

__all__ = ["Provider", "ProviderRequest", "ProviderStream", "Scripted", "ToolSpec"]
