"""The keywords every HTTP provider takes have one home, ``HTTPSettings``: each
provider's constructor lists all of them, typed and defaulted as there, and hands them
on unchanged."""

from __future__ import annotations

import dataclasses
import inspect
from typing import Any

import httpx
import pytest

from navi_core import Anthropic, OpenAIChat, OpenAIResponses, Timeout
from navi_core.providers._http import HTTP_DEFAULTS, HTTPProvider, HTTPSettings

PROVIDERS = [OpenAIChat, OpenAIResponses, Anthropic]


@pytest.mark.parametrize("cls", PROVIDERS, ids=lambda c: c.__name__)
def test_every_provider_takes_the_shared_keywords(cls: type[HTTPProvider]) -> None:
    params = inspect.signature(cls).parameters
    for field in dataclasses.fields(HTTPSettings):
        p = params[field.name]
        assert p.kind is inspect.Parameter.KEYWORD_ONLY, field.name
        assert p.annotation == field.type, field.name
        assert p.default == getattr(HTTP_DEFAULTS, field.name), field.name
    assert "HTTPSettings" in (cls.__doc__ or "")


@pytest.mark.parametrize("cls", PROVIDERS, ids=lambda c: c.__name__)
def test_the_shared_keywords_reach_the_base(cls: Any) -> None:
    timeout = Timeout(connect=1.0, read=2.0, write=3.0, pool=4.0)
    with httpx.Client() as client:
        provider: HTTPProvider = cls(
            "m",
            "http://127.0.0.1:9",
            "key",
            timeout=timeout,
            headers={"X-Extra": "1"},
            client=client,
        )
        assert provider._client is client and not provider._owns_client
    assert provider._headers["x-extra"] == "1"
    assert provider._timeout == httpx.Timeout(
        connect=1.0, read=2.0, write=3.0, pool=4.0
    )
    own: HTTPProvider = cls("m", "http://127.0.0.1:9")
    assert own._owns_client and own._timeout == httpx.Timeout(
        connect=10.0, read=120.0, write=30.0, pool=10.0
    )
    own.close()
