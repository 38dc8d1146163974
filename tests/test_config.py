"""Settings: names, parsing, and the one-line exit 2 on a bad value."""

from __future__ import annotations

import itertools
import re
import subprocess
import sys
from pathlib import Path

import pytest

from bot.config import RETIRED, known_names, load_settings, require, unknown_names
from bot.errors import ConfigError
from tests.conftest import ON_PG, sqlite_only


def test_reads_env_and_dotenv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODEL=from-dotenv\nALLOWED_USER_IDS=1, 2,3\n")
    monkeypatch.setenv("TIMEZONE", "Europe/Berlin")
    s = load_settings()
    assert s.llm_model == "from-dotenv"
    assert s.allowed_user_ids == (1, 2, 3)
    assert s.timezone == "Europe/Berlin"
    assert s.approvals == "risky"
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
    assert {"llm_api_key", "brave_api_key", "embeddings_api_key"} <= set(secret_fields)
    values = {name: f"secret-{i}-value" for i, name in enumerate(secret_fields)}
    values["telegram_bot_token"] = "123456:TOKENsecretTOKEN"
    s = load_settings(**values)
    assert set(s.secrets()) == set(values.values())


@pytest.mark.parametrize(
    ("name", "value", "expected"),
    [
        ("ALLOWED_USER_IDS", "12,abc", "ALLOWED_USER_IDS"),
        ("TIMEZONE", "Mars/Olympus", "TIMEZONE"),
        ("BACKUP_KEEP", "-1", "BACKUP_KEEP"),
        ("APPROVALS", "sometimes", "APPROVALS"),
        ("LLM_BASE_URL", "ftp://x", "LLM_BASE_URL"),
        ("SESSION_SPLIT", "daily 25:00", "SESSION_SPLIT"),
        ("SESSION_SPLIT_TIME", "25:00", "SESSION_SPLIT_TIME"),
        ("BUDGET_USD", "5", "BUDGET_USD"),
        ("USER_TOKEN_CAP", "1.5/day", "USER_TOKEN_CAP"),
        ("DAILY_BUDGET_USD", "-1", "DAILY_BUDGET_USD"),
        ("CODE_PRIVATE_NETWORKS", "maybe", "CODE_PRIVATE_NETWORKS"),
        ("CODE_NETWORK", "maybe", "CODE_NETWORK"),
        # The merged settings say what is wrong with the value.
        ("SESSION_SPLIT", "hourly", "SESSION_SPLIT: must be daily, weekly or none"),
        ("BUDGET_USD", "5", "BUDGET_USD: '5': give a number per day and/or per month"),
        ("BUDGET_USD", "5/day, 6/day", "BUDGET_USD: '6/day': the day is given twice"),
        ("USER_TOKEN_CAP", "0/day", "USER_TOKEN_CAP: '0/day': must be more than 0"),
        ("CODE_NETWORK", "private", "CODE_NETWORK: Input should be 'off', 'on' or 'all'"),
        ("EMBEDDINGS", "two words", "EMBEDDINGS: must be wordllama, openai, or the name"),
    ],
)
def test_invalid_values_name_the_variable(
    monkeypatch: pytest.MonkeyPatch, name: str, value: str, expected: str
) -> None:
    monkeypatch.setenv(name, value)
    with pytest.raises(ConfigError) as info:
        load_settings()
    assert str(info.value).startswith(expected)
    assert len(str(info.value).splitlines()) == 1


def test_a_former_setting_is_one_warning_not_an_error(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """A .env from an older release, naming knobs that are now constants, still loads."""
    for name in RETIRED:
        monkeypatch.delenv(name, raising=False)
    (tmp_path / ".env").write_text("LLM_MODEL=m\nMEMORY_SHORT_DAYS=7\nAGENT_MAX_TURNS=0\n")
    monkeypatch.setenv("LLM_MAX_RETRIES", "9")
    assert load_settings().llm_model == "m"
    assert unknown_names() == [
        f"{Path('.env')}: AGENT_MAX_TURNS is no longer a setting (its default is built in); "
        "remove it",
        "environment: LLM_MAX_RETRIES is no longer a setting (its default is built in); remove it",
        f"{Path('.env')}: MEMORY_SHORT_DAYS is no longer a setting (its default is built in); "
        "remove it",
    ]


def test_the_retired_names_are_not_settings() -> None:
    assert not RETIRED & known_names()


def test_the_readme_table_lists_exactly_the_settings() -> None:
    """README.md's settings table documents each variable once, and exactly those the code
    reads (field names and their aliases), so the table cannot drift from the code."""
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    table = readme[readme.index("| Variable | Default | Meaning |") :].splitlines()[2:]
    rows = [line for line in itertools.takewhile(lambda line: line.startswith("|"), table)]
    # Each row names one variable, or two joined with " / " (a pair documented together).
    names = [n for row in rows for n in re.findall(r"`([A-Z][A-Z0-9_]+)`", row.split(" | ")[0])]
    assert len(names) == len(set(names)), "a variable is documented twice"
    assert set(names) - {"SIDEKICK_HOME"} == known_names()


def test_require_names_missing_setting() -> None:
    s = load_settings()
    with pytest.raises(ConfigError, match="TELEGRAM_BOT_TOKEN is not set"):
        require(s, "telegram_bot_token")


def sidekick(
    tmp_path: Path, module: str, *args: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """Run `python -m <module> args` as a person would: a clean environment, cwd tmp_path
    (PYTHONPATH: this checkout's code, whatever the venv installed)."""
    root = str(Path(__file__).resolve().parents[1])
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "PYTHONPATH": root, **env},
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
@pytest.mark.db
def test_migrate_creates_database(tmp_path: Path) -> None:
    data = str(tmp_path / "d")
    proc = sidekick(tmp_path, "bot.cli", "migrate", DATA_DIR=data)
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "d" / "sidekick.db").exists()
    again = sidekick(tmp_path, "bot.cli", "migrate", DATA_DIR=data)
    assert "applied 0 migration(s)" in again.stdout
