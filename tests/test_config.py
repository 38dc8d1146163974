"""Settings: names, parsing, and the one-line exit 2 on a bad value."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import load_settings, require
from bot.errors import ConfigError
from tests.conftest import ON_PG, sqlite_only


def test_reads_env_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=from-dotenv\nALLOWED_USER_IDS=1, 2,3\n")
    monkeypatch.setenv("TIMEZONE", "Europe/Berlin")
    s = load_settings()
    assert s.llm_model == "from-dotenv"
    assert s.allowed_user_ids == frozenset({1, 2, 3})
    assert s.timezone == "Europe/Berlin"
    assert s.agent_max_tool_calls == 75
    assert s.telegram_api_url == "https://api.telegram.org"
    if not ON_PG:  # make test-pg sets DATABASE_URL
        assert s.db_url.endswith("data/sidekick.db")


def test_secrets_are_hidden_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TELEGRAM_BOT_TOKEN", "123456:ABCDEFsecretsecretsecretsecretsecret")
    monkeypatch.setenv("LLM_API_KEY", "sk-verysecret")
    s = load_settings()
    assert "ABCDEFsecret" not in repr(s) and "sk-verysecret" not in repr(s)
    assert set(s.secrets()) == {"123456:ABCDEFsecretsecretsecretsecretsecret", "sk-verysecret"}


def test_every_secret_setting_is_scrubbed() -> None:
    """secrets() reads the SecretStr fields themselves: a new key setting (a tool's too)
    is covered without a line anywhere."""
    from pydantic import SecretStr

    from bot.config import Settings

    secret_fields = [
        name
        for name, field in Settings.model_fields.items()
        if SecretStr in getattr(field.annotation, "__args__", (field.annotation,))
    ]
    assert {"llm_api_key", "brave_api_key", "embeddings_api_key", "webhook_secret"} <= set(
        secret_fields
    )
    values = {name: f"secret-{i}-value" for i, name in enumerate(secret_fields)}
    values["telegram_bot_token"] = "123456:TOKENsecretTOKEN"
    s = load_settings(**values)
    assert set(s.secrets()) == set(values.values())


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ALLOWED_USER_IDS", "12,abc", "ALLOWED_USER_IDS"),
        ("TIMEZONE", "Mars/Olympus", "TIMEZONE"),
        ("AGENT_MAX_TURNS", "0", "AGENT_MAX_TOOL_CALLS"),  # the old name, reported as the new
        ("AGENT_MAX_TOOL_CALLS", "0", "AGENT_MAX_TOOL_CALLS"),
        ("LLM_BASE_URL", "ftp://x", "LLM_BASE_URL"),
        ("SESSION_SPLIT_TIME", "25:00", "SESSION_SPLIT_TIME"),
        ("CODE_NETWORK", "maybe", "CODE_NETWORK"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(expected)


@pytest.mark.parametrize("name", ["AGENT_MAX_TOOL_CALLS", "AGENT_MAX_TURNS"])
def test_the_tool_call_cap_is_read_under_its_name_and_its_old_one(
    monkeypatch: pytest.MonkeyPatch, name: str
) -> None:
    monkeypatch.setenv(name, "7")
    assert load_settings().agent_max_tool_calls == 7


def test_require_names_missing_setting() -> None:
    s = load_settings()
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN is not set"):
        require(s, "telegram_bot_token")


def sidekick(
    tmp_path: Path, module: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `python -m <module> args` as a person would: a clean environment, cwd tmp_path."""
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), **env},
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_cli_exits_2_with_one_line(tmp_path: Path) -> None:
    proc = sidekick(tmp_path, "bot.cli", "migrate", TIMEZONE="Nowhere/Atlantis")
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "TIMEZONE" in lines[0] and "Traceback" not in proc.stderr


def test_run_without_token_exits_2(tmp_path: Path) -> None:
    proc = sidekick(tmp_path, "bot", LLM_MODEL="m")
    assert proc.returncode == 2
    assert "TELEGRAM_BOT_TOKEN" in proc.stderr and "Traceback" not in proc.stderr


@sqlite_only
def test_migrate_creates_database(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    proc = sidekick(tmp_path, "bot.cli", "migrate", DATA_DIR=data)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d" / "sidekick.db").exists()
    again = sidekick(tmp_path, "bot.cli", "migrate", DATA_DIR=data)
    assert "applied 0 migration(s)" in again.stdout
