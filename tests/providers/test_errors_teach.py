"""Errors that teach: a base URL missing (or doubling) /v1, a model the server does not
have, a host DNS cannot resolve, and something that is not a provider each say what
went wrong and what to do, without showing a credential."""

from __future__ import annotations

import pytest
from loopback import LoopbackServer, Reply
from wire_streams import drain, request

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


def test_a_404_on_a_right_looking_url_only_shows_it(loopback: LoopbackServer) -> None:
    loopback.add(GO_404)
    with (
        OpenAIChat("m", loopback.url + "/v1") as provider,
        pytest.raises(BadRequest) as caught,
    ):
        drain(provider, request("hi"))
    assert str(caught.value) == (
        f"404 page not found (POST {loopback.url}/v1/chat/completions)"
    )


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
