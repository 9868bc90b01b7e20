"""Errors that teach: a base URL missing (or doubling) /v1, a model the server does not
have, a host DNS cannot resolve, and something that is not a provider each say what
went wrong and what to do, without showing a credential."""

from __future__ import annotations

import re

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import anthropic_body, drain, openai_body, request, responses_body

from navi_core import Agent, Anthropic, OpenAIChat, OpenAIResponses
from navi_core.errors import BadRequest, TransportError
from navi_core.providers import Scripted

GO_404 = Reply.text(404, "404 page not found")  # what Ollama's and Go servers send


def test_openai_base_url_without_v1(loopback: LoopbackServer) -> None:
    loopback.add(GO_404)
    with (
        OpenAIChat("qwen2.5", loopback.url) as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert caught.value.status_code == 404
    assert f"POST {loopback.url}/chat/completions" in message
    assert "the base URL has no /v1" in message
    assert f"try base_url='{loopback.url}/v1'" in message


def test_responses_base_url_without_v1(loopback: LoopbackServer) -> None:
    loopback.add(GO_404)
    with (
        OpenAIResponses("gpt-5", loopback.url + "/") as provider,
        pytest.raises(BadRequest, match=r"has no /v1.*try base_url='.*/v1'"),
    ):
        drain(provider, request("hi"))


def test_anthropic_base_url_with_v1(loopback: LoopbackServer) -> None:
    loopback.add(Reply.json(404, {"type": "error", "error": {"type": "not_found_error",
                                                             "message": "Not Found"}}))  # fmt: skip
    with (
        Anthropic("claude-x", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert message.startswith("Not Found (POST ")
    assert f"{loopback.url}/v1/v1/messages" in message
    assert "ends in /v1, but Anthropic's base has none" in message
    assert f"try base_url='{loopback.url}'" in message


def test_a_404_on_a_right_looking_url_says_to_check_it(
    loopback: LoopbackServer,
) -> None:
    loopback.add(GO_404)
    with (
        OpenAIChat("m", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value) == (
        f"404 page not found (POST {loopback.url}/v1/chat/completions): check"
        " base_url: the server has no endpoint at this URL"
        " (base_url + /chat/completions)"
    )


# -- a base URL that is an endpoint's URL, or a path the server does not serve -------

#: (provider, the endpoint's path on a server, the base URL's path to use instead)
ENDPOINTS = {
    "OpenAIChat": (OpenAIChat, "/v1/chat/completions", "/v1"),
    "OpenAIResponses": (OpenAIResponses, "/v1/responses", "/v1"),
    "Anthropic": (Anthropic, "/v1/messages", ""),
}
#: the path each provider adds to its base URL
ADDS = {"OpenAIChat": "/chat/completions", "OpenAIResponses": "/responses",
        "Anthropic": "/v1/messages"}  # fmt: skip
SSE_OK = {
    "OpenAIChat": Reply.sse(openai_body(["fine"])),
    "OpenAIResponses": Reply.sse(responses_body(["fine"])),
    "Anthropic": Reply.sse(anthropic_body([("text", ["fine"])])),
}


def _suggested(message: str) -> str:
    found = re.search(r"use base_url='([^']*)'", message)
    assert found is not None, message
    return found.group(1)


@pytest.mark.parametrize("slash", ["", "/"], ids=["bare", "trailing-slash"])
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_base_url_ending_with_the_endpoint_path_is_refused(
    loopback: LoopbackServer, name: str, slash: str
) -> None:
    """The endpoint's own URL given as the base (as a curl example writes it) would
    POST to .../chat/completions/chat/completions: refused when the provider is made,
    with the base URL to use, which then works."""
    cls, endpoint, base = ENDPOINTS[name]
    given = loopback.url + endpoint + slash
    with pytest.raises(ValueError) as caught:
        cls("m", given)
    message = str(caught.value)
    assert message == (
        f"base_url {given!r} ends with {ADDS[name]}, the path {name} adds itself: "
        f"use base_url='{loopback.url + base}'"
    )
    assert not loopback.requests

    loopback.add(SSE_OK[name])
    with cls("m", _suggested(message)) as provider:
        _, answer = drain(provider, request("hi"))
    assert answer.content[0].text == "fine"  # type: ignore[union-attr]
    assert [r.path for r in loopback.requests] == [endpoint]


@pytest.mark.parametrize(
    ("name", "given", "base"),
    [
        ("OpenAIChat", "/v1/responses", "/v1"),  # the other OpenAI endpoint
        ("OpenAIResponses", "/v1/chat/completions/", "/v1"),
        ("Anthropic", "/messages", ""),  # the endpoint's name without /v1
        ("OpenAIChat", "/api/v1/chat/completions", "/api/v1"),
    ],
)
def test_other_endpoint_urls_are_refused_too(
    loopback: LoopbackServer, name: str, given: str, base: str
) -> None:
    cls = ENDPOINTS[name][0]
    with pytest.raises(ValueError) as caught:
        cls("m", loopback.url + given)
    assert _suggested(str(caught.value)) == loopback.url + base


def test_a_refused_endpoint_url_shows_no_credentials(loopback: LoopbackServer) -> None:
    """User info and a key in the query stay out of the message, the suggestion too,
    which says that the URL's credentials are left out of it."""
    given = (
        loopback.url.replace("http://", "http://me:hunter2secret@")
        + "/v1/chat/completions?api_key=sk-abcd1234&api-version=2024-10"
    )
    with pytest.raises(ValueError) as caught:
        OpenAIChat("m", given)
    message = str(caught.value)
    assert "hunter2secret" not in message and "sk-abcd1234" not in message
    assert _suggested(message) == loopback.url + "/v1?api-version=2024-10"
    assert "credentials" in message


@pytest.mark.parametrize(
    "path", ["/v1/chat/completions-beta", "/chat", "/v1/completions", "/v1/message"]
)
def test_a_base_url_that_only_looks_like_an_endpoint_is_kept(path: str) -> None:
    for cls in (OpenAIChat, OpenAIResponses, Anthropic):
        with cls("m", "http://127.0.0.1:9" + path) as provider:
            assert provider.base_url == "http://127.0.0.1:9" + path


#: what servers answer for a path they do not serve
ROUTE_404 = {
    "llama.cpp": Reply.json(
        404,
        {
            "error": {
                "code": 404,
                "message": "File Not Found",
                "type": "not_found_error",
            }
        },
        reason="Not Found",
    ),
    "FastAPI (vLLM)": Reply.json(404, {"detail": "Not Found"}),
    "Express": Reply(
        status=404,
        body=(
            b"<!DOCTYPE html><html><body><pre>Cannot POST /api/v1/x</pre></body></html>",
        ),
        headers=(("content-type", "text/html; charset=utf-8"),),
        chunked=False,
    ),
    "OpenAI": Reply.json(
        404,
        {
            "error": {
                "message": "Invalid URL (POST /api/v1/chat/completions)",
                "type": "invalid_request_error",
                "param": None,
                "code": None,
            }
        },
    ),
    "Anthropic": Reply.json(
        404,
        {"type": "error", "error": {"type": "not_found_error", "message": "Not Found"}},
    ),
    "no body": Reply(status=404, body=(), headers=(), chunked=False),
}


@pytest.mark.parametrize("server", sorted(ROUTE_404))
@pytest.mark.parametrize("name", sorted(ENDPOINTS))
def test_a_404_for_a_path_the_server_lacks_says_to_check_base_url(
    loopback: LoopbackServer, name: str, server: str
) -> None:
    """``.../api/v1`` on a server that serves ``/v1``: the 404 names the URL it went
    to and says that base_url is what to change."""
    cls, path = ENDPOINTS[name][0], ADDS[name]
    loopback.add(ROUTE_404[server])
    base = loopback.url + ("/api/v1" if name != "Anthropic" else "/api")
    with cls("m", base) as provider, pytest.raises(BadRequest) as caught:
        drain(provider, request("hi"))
    message = str(caught.value)
    assert caught.value.status_code == 404
    assert f"(POST {base}{path}): check base_url: the server has no endpoint" in (
        message
    )
    assert message.endswith(f"(base_url + {path})")
    assert [r.path for r in loopback.requests] == [
        base.removeprefix(loopback.url) + path
    ]


def test_an_api_404_with_its_own_message_is_not_blamed_on_the_url(
    loopback: LoopbackServer,
) -> None:
    """A 404 the API itself sends about something else (an item that is not stored)
    keeps its words and the URL, with no base-URL advice."""
    body = {"error": {"message": "Item with id 'rs_1' not found. Items are not"
                      " persisted when `store` is set to false.",
                      "type": "invalid_request_error", "param": "input"}}  # fmt: skip
    loopback.add(Reply.json(404, body))
    with (
        OpenAIResponses("gpt-5", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert message.endswith(f"(POST {loopback.url}/v1/responses)")
    assert "base_url" not in message


def test_a_404_hint_shows_no_credentials(loopback: LoopbackServer) -> None:
    loopback.add(ROUTE_404["llama.cpp"])
    url = (
        loopback.url.replace("http://", "http://me:hunter2secret@")
        + "/api/v1?api_key=sk-abcd1234"
    )
    with OpenAIChat("m", url) as provider, pytest.raises(BadRequest) as caught:
        drain(provider, request("hi"))
    message = str(caught.value)
    assert "hunter2secret" not in message and "sk-abcd1234" not in message
    assert "check base_url" in message


def test_ollama_model_not_pulled(loopback: LoopbackServer) -> None:
    body = {"error": {"message": 'model "llama3.2" not found, try pulling it first',
                      "type": "api_error", "param": None, "code": None}}  # fmt: skip
    loopback.add(Reply.json(404, body))
    with (
        OpenAIChat("llama3.2", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value) == (
        f"model 'llama3.2' is not available at {loopback.url}/v1: model \"llama3.2\""
        " not found, try pulling it first (run: ollama pull llama3.2)"
    )


def test_vllm_model_does_not_exist(loopback: LoopbackServer) -> None:
    body = {"object": "error", "message": "The model `qwen-7b` does not exist.",
            "type": "NotFoundError", "param": None, "code": 404}  # fmt: skip
    loopback.add(Reply.json(404, body))
    with (
        OpenAIChat("qwen-7b", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest, match=r"^model 'qwen-7b' is not available at "),
    ):
        drain(provider, request("hi"))


def test_openai_model_not_found_code(loopback: LoopbackServer) -> None:
    body = {"error": {"message": "The model `gpt-9` does not exist or you do not have"
                      " access to it.", "type": "invalid_request_error",
                      "code": "model_not_found"}}  # fmt: skip
    loopback.add(Reply.json(404, body))
    with (
        OpenAIResponses("gpt-9", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest, match=r"^model 'gpt-9' is not available"),
    ):
        drain(provider, request("hi"))


def test_dns_failure_names_the_host() -> None:
    with (
        OpenAIChat("m", "http://user:pa55word@nx-host.invalid/v1") as provider,
        pytest.raises(TransportError) as caught,
    ):
        drain(provider, request("hi"))
    message = str(caught.value)
    assert message.startswith(
        "cannot resolve host 'nx-host.invalid' (DNS lookup failed"
    )
    assert "pa55word" not in message


def test_credentials_in_the_base_url_are_not_shown(loopback: LoopbackServer) -> None:
    loopback.add(GO_404)
    url = (
        loopback.url.replace("http://", "http://me:hunter2secret@")
        + "?api_key=sk-abcd1234"
    )
    with OpenAIChat("m", url) as provider, pytest.raises(BadRequest) as caught:
        drain(provider, request("hi"))
    message = str(caught.value)
    assert "hunter2secret" not in message and "sk-abcd1234" not in message
    assert "has no /v1" in message


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ("gpt-4o", "not the string 'gpt-4o'; a model name goes inside the provider"),
        (OpenAIChat, "not the class OpenAIChat itself; create one: OpenAIChat(...)"),
        (Scripted, "not the class Scripted itself; create one: Scripted(...)"),
        (object(), "not builtins.object"),
        (None, "not builtins.NoneType"),
    ],
)
def test_a_non_provider_is_a_type_error(value: object, says: str) -> None:
    with pytest.raises(TypeError) as caught:
        Agent(value)  # type: ignore[arg-type]
    message = str(caught.value)
    assert message.startswith(
        "provider must be a provider: OpenAIChat(model, base_url)"
    )
    assert message.endswith(says)
