"""The library's missing-extra errors name a pip command that works for this copy
(the same ``install_command`` the CLI's hints use), not only the index package."""

from __future__ import annotations

import subprocess
import sys

import pytest

from navi_core._extras import install_command

CASES = {
    "http2": (
        "h2",
        "from navi_core.providers._http import make_client\n"
        "make_client('http://127.0.0.1:1', http2=True)",
    ),
    "postgres": ("psycopg", "import navi_core.store.postgres"),
    "otel": ("opentelemetry", "import navi_core.tracing"),
}


@pytest.mark.parametrize("extra", sorted(CASES))
def test_a_missing_extra_names_the_command_for_this_install(extra: str) -> None:
    blocked, code = CASES[extra]
    script = f"import sys\nsys.modules[{blocked!r}] = None\n{code}\n"
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 1
    last = result.stderr.strip().splitlines()[-1]
    assert last.startswith("ImportError: ")
    assert last.endswith(install_command(extra)), last
