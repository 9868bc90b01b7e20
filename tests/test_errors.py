"""The error tree: retryable flags, pickling, and no secrets in text."""

from __future__ import annotations

import pickle

import pytest

from navi_core import errors
from navi_core.providers.errormap import (
    error_for_status,
    error_for_stream,
    is_context_overflow,
)

RETRYABLE = {
    "RateLimited",
    "Overloaded",
    "ServerError",
    "TransportError",
    "MalformedStream",
}
FINAL = {"AuthFailed", "BadRequest", "ContextOverflow"}


@pytest.mark.parametrize("name", sorted(RETRYABLE | FINAL))
def test_provider_errors_and_their_retry_flag(name: str) -> None:
    cls = getattr(errors, name)
    assert issubclass(cls, errors.ProviderError) and issubclass(cls, errors.NaviError)
    assert cls.retryable is (name in RETRYABLE)
    err = cls("msg", status_code=418, retry_after_ms=5)
    back = pickle.loads(pickle.dumps(err))
    assert type(back) is cls
    assert (back.message, back.status_code, back.retry_after_ms) == ("msg", 418, 5)


def test_malformed_stream_carries_offset() -> None:
    err = errors.MalformedStream("bad json", offset=42)
    assert pickle.loads(pickle.dumps(err)).offset == 42


@pytest.mark.parametrize(
    ("status", "message", "cls"),
    [
        (429, "", errors.RateLimited),
        (529, "", errors.Overloaded),
        (500, "", errors.ServerError),
        (503, "", errors.ServerError),
        (401, "", errors.AuthFailed),
        (403, "", errors.AuthFailed),
        (404, "", errors.BadRequest),
        (
            400,
            "This model's maximum context length is 8192 tokens",
            errors.ContextOverflow,
        ),
        (
            400,
            "prompt is too long: 210000 tokens > 200000 maximum",
            errors.ContextOverflow,
        ),
        (400, "invalid tool schema", errors.BadRequest),
    ],
)
def test_status_mapping(
    status: int, message: str, cls: type[errors.ProviderError]
) -> None:
    err = error_for_status(status, message)
    assert type(err) is cls and err.status_code == status


def test_stream_error_mapping() -> None:
    assert type(error_for_stream("overloaded_error", "Overloaded")) is errors.Overloaded
    assert type(error_for_stream("weird", "x")) is errors.ServerError
    # an HTTP status as the kind maps as that status does, without being one
    for kind, cls in (
        ("429", errors.RateLimited),
        ("400", errors.BadRequest),
        ("401", errors.AuthFailed),
        ("503", errors.ServerError),
        ("529", errors.Overloaded),
    ):
        err = error_for_stream(kind, "said so")
        assert type(err) is cls and err.status_code is None, kind
        assert err.message == "said so"
    assert type(error_for_stream("400", "maximum context length")) is (
        errors.ContextOverflow
    )
    assert type(error_for_stream("42", "x")) is errors.ServerError
    assert is_context_overflow("the request exceeds the available context size")
    assert not is_context_overflow("rate limit reached")
