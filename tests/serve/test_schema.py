"""schemathesis against ``/openapi.json``: every operation answers as documented."""

from __future__ import annotations

from typing import Any

import pytest
import schemathesis
from hypothesis import HealthCheck, settings
from servekit import TOKEN, Served


@pytest.fixture(scope="module")
def api_schema(served: Served) -> Any:
    return schemathesis.openapi.from_url(served.url + "/openapi.json")


schema = schemathesis.pytest.from_fixture("api_schema")


@schema.parametrize()
@settings(
    max_examples=10,
    derandomize=True,  # the same examples on every run: bounded and repeatable
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
def test_every_operation_answers_as_documented(case: Any) -> None:
    case.call_and_validate(headers={"Authorization": f"Bearer {TOKEN}"}, timeout=30)
