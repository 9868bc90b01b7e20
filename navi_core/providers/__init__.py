"""Model providers: the seam, OpenAI-compatible chat, Anthropic and the offline Scripted.

A provider author finds here the seam (``Provider``, ``ProviderRequest``,
``ProviderStream``, ``RequestConfig``) and ``DeltaStream``, the ``ProviderStream``
every built-in provider returns.
"""

from __future__ import annotations

from ..tools._tool import ToolSpec
from .base import Provider, ProviderRequest, ProviderStream, RequestConfig
from .delta_stream import DeltaStream
from .scripted import Scripted

__all__ = [
    # the seam
    "Provider",
    "ProviderRequest",
    "ProviderStream",
    "RequestConfig",
    "ToolSpec",
    # building a provider
    "DeltaStream",
    # the offline provider
    "Scripted",
]
