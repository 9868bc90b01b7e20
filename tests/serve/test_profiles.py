"""``navi-core serve --config FILE --profile NAME``: the provider, the key variable, the
system prompt and the tools come from a chat profile, over real gunicorn."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from fake_model import FakeModel
from servekit import Served, child_env


def write_profiles(root: Path, model_url: str) -> Path:
    path = root / "config.toml"
    path.write_text(
        f"""
default_profile = "local"

[profiles.local]
provider = "openai"
model = "fake-model"
base_url = "{model_url}"
api_key_env = "SERVE_PROFILE_KEY"
system = "You are the served profile."
tools = ["workspace"]
workspace = "{root / "workspace"}"
"""
    )
    return path


def test_a_profile_names_the_provider_key_system_and_tools(
    fake_model: FakeModel, served_dir: Path
) -> None:
    config = write_profiles(served_dir, fake_model.url)
    env = child_env(SERVE_PROFILE_KEY="sk-profile-key-123456")
    args = [
        "--config",
        str(config),
        "--profile",
        "local",
        "--db",
        str(served_dir / "p.db"),
    ]
    with Served.start(served_dir, args, env=env) as served, served.client() as client:
        sid = client.new_session()
        result = client.turn(sid, "list the workspace")
        assert result.error is None, result.error
        messages = client.messages(sid)
    assert messages[0]["role"] == "system"
    assert "You are the served profile." in str(messages[0])
    assert messages[-1]["role"] == "assistant"
    assert "sk-profile-key" not in (served_dir / "p.db").read_bytes().decode("latin-1")


def test_a_profile_whose_key_variable_is_unset_is_refused(served_dir: Path) -> None:
    config = write_profiles(served_dir, "http://127.0.0.1:9/v1")
    env = child_env()
    env.pop("SERVE_PROFILE_KEY", None)
    out = subprocess.run(
        [sys.executable, "-m", "navi_core", "serve", "--config", str(config)],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 2
    assert "SERVE_PROFILE_KEY" in out.stderr
