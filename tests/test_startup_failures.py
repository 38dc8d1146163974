"""Every startup failure path: a real `sidekick` process exits by itself with status 2 and one
line naming the setting (no traceback, no hang), whatever the command."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path

import pytest

from bot.app import build_app
from bot.errors import ConfigError
from tests.conftest import make_settings, sqlite_only
from tests.test_config import sidekick

GOOD = {"LLM_MODEL": "m", "TELEGRAM_BOT_TOKEN": "123456:AAAA-bbbb_cccc", "LLM_API_KEY": "sk-x"}


def mcp_file(tmp_path: Path, name: str, text: str) -> str:
    (tmp_path / name).write_text(text)
    return name  # relative: read from the working directory, as a person would write it


def bad_settings(tmp_path: Path) -> dict[str, tuple[dict[str, str], str]]:
    """Each failure path: the environment that triggers it and the words its line must hold."""
    (tmp_path / "a-file").write_text("")
    return {
        "mcp missing file": ({"MCP_CONFIG": "absent.json"}, "MCP_CONFIG: cannot read"),
        "mcp invalid json": (
            {"MCP_CONFIG": mcp_file(tmp_path, "bad.json", "{nope")},
            "MCP_CONFIG: bad.json is not valid JSON",
        ),
        "mcp dotted name": (
            {
                "MCP_CONFIG": mcp_file(
                    tmp_path, "dot.json", '{"mcpServers":{"a.b":{"command":"x"}}}'
                )
            },
            "MCP_CONFIG: server 'a.b'",
        ),
        "mcp servers layout": (
            {"MCP_CONFIG": mcp_file(tmp_path, "vs.json", '{"servers":{"a":{"command":"x"}}}')},
            'found "servers"',
        ),
        "mcp sse": (
            {
                "MCP_CONFIG": mcp_file(
                    tmp_path, "sse.json", '{"mcpServers":{"a":{"type":"sse","url":"http://x/sse"}}}'
                )
            },
            "SSE transport is not supported",
        ),
        "mcp folder": ({"MCP_CONFIG": "."}, "MCP_CONFIG: . is a folder"),
        "malformed token": ({"TELEGRAM_BOT_TOKEN": "notatoken"}, "TELEGRAM_BOT_TOKEN: does not"),
        "log level": ({"LOG_LEVEL": "verbose"}, "LOG_LEVEL: must be one of"),
        "unwritable data dir": ({"DATA_DIR": str(tmp_path / "a-file" / "d")}, "DATA_DIR: cannot"),
        "unknown database": ({"DATABASE_URL": "mysql://db/x"}, "DATABASE_URL: must be sqlite"),
    }


CASES = [
    "mcp missing file",
    "mcp invalid json",
    "mcp dotted name",
    "mcp servers layout",
    "mcp sse",
    "mcp folder",
    "malformed token",
    "log level",
    "unwritable data dir",
    "unknown database",
]


def assert_one_line(proc: object, words: str) -> None:
    code, err = proc.returncode, proc.stderr  # type: ignore[attr-defined]
    assert code == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("sidekick: configuration error: ") and words in lines[0], err


@pytest.mark.parametrize("case", CASES)
def test_run_exits_2_with_one_line(tmp_path: Path, case: str) -> None:
    env, words = bad_settings(tmp_path)[case]
    assert_one_line(sidekick(tmp_path, "bot.cli", "run", **{**GOOD, **env}), words)


@pytest.mark.parametrize("command", ["chat", "doctor"])
@pytest.mark.parametrize("case", ["mcp missing file", "mcp servers layout", "malformed token"])
def test_chat_and_doctor_exit_2_with_one_line(tmp_path: Path, command: str, case: str) -> None:
    env, words = bad_settings(tmp_path)[case]
    assert_one_line(sidekick(tmp_path, "bot.cli", command, **{**GOOD, **env}), words)


def test_every_bad_setting_is_reported_at_once(tmp_path: Path) -> None:
    env = {"LOG_LEVEL": "loud", "TIMEZONE": "Mars/Base", "BACKUP_KEEP": "-1"}
    proc = sidekick(tmp_path, "bot.cli", "doctor", **{**GOOD, **env})
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    named = [line.split(": ")[2] for line in proc.stderr.strip().splitlines()]
    assert sorted(named) == ["BACKUP_KEEP", "LOG_LEVEL", "TIMEZONE"]


@pytest.mark.db
def test_blank_values_mean_unset(tmp_path: Path) -> None:
    blanks = {"MCP_CONFIG": "", "LOG_LEVEL": "", "TIMEZONE": "", "GROUP_REPLIES": ""}
    proc = sidekick(tmp_path, "bot.cli", "migrate", **blanks)
    assert proc.returncode == 0, proc.stderr
    assert "applied" in proc.stdout


@pytest.mark.db
def test_env_file_and_sidekick_home(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / ".env").write_text("DATA_DIR=store\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    proc = sidekick(elsewhere, "bot.cli", "migrate", SIDEKICK_HOME=str(home))
    assert proc.returncode == 0, proc.stderr
    assert (home / "store" / "sidekick.db").exists() and not (elsewhere / "store").exists()
    (tmp_path / "other.env").write_text("LOG_LEVEL=shouting\n")
    proc = sidekick(elsewhere, "bot.cli", "--env-file", str(tmp_path / "other.env"), "migrate")
    assert proc.returncode == 2 and "LOG_LEVEL" in proc.stderr
    proc = sidekick(elsewhere, "bot.cli", "--env-file", "missing.env", "migrate")
    assert proc.returncode == 2 and "--env-file" in proc.stderr


def test_version_and_help_per_subcommand(tmp_path: Path) -> None:
    proc = sidekick(tmp_path, "bot.cli", "--version")
    assert proc.returncode == 0 and proc.stdout.startswith("sidekick ")
    proc = sidekick(tmp_path, "bot.cli", "chat", "--help")
    assert proc.returncode == 0 and "--as TELEGRAM_ID" in proc.stdout


@pytest.mark.db
async def test_a_failed_build_leaves_no_thread_behind(tmp_path: Path) -> None:
    # Without the preflight (a test or another caller of build_app), a bad MCP_CONFIG is
    # found after the engine is open: it must be disposed, or its thread keeps the process.
    before = {t for t in threading.enumerate() if not t.daemon}
    settings = make_settings(tmp_path, mcp_config=tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="MCP_CONFIG"):
        await build_app(settings)
    # A closed connection's worker thread ends a moment after close returns; one left
    # open never does.
    for _ in range(1200):  # a minute at most: a loaded machine is slow to end threads
        if {t for t in threading.enumerate() if not t.daemon} == before:
            break
        await asyncio.sleep(0.05)
    assert {t for t in threading.enumerate() if not t.daemon} == before


@pytest.mark.db
async def test_telegram_unreachable_at_start_is_not_a_configuration_error(
    tmp_path: Path,
) -> None:
    from bot.errors import ProviderError
    from bot.telegram.dispatcher import build_runtime
    from bot.telegram.main import check_token

    settings = make_settings(
        tmp_path, telegram_bot_token="123456:AAAA-bbbb", telegram_api_url="http://127.0.0.1:9"
    )
    rt = build_runtime(await build_app(settings))
    try:
        with pytest.raises(ProviderError, match="cannot reach the Telegram Bot API") as info:
            await check_token(rt, attempts=1)
    finally:
        await rt.shutdown()
    assert not isinstance(info.value, ConfigError)


def test_five_errors_in_one_env_file_in_one_run(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "LOG_LEVEL=loud\nTIMEZONE=Mars/Base\nBACKUP_KEEP=-1\nTELEGRAM_BOT_TOKEN=nope\n"
        "MCP_CONFIG=absent.json\n"
    )
    proc = sidekick(tmp_path, "bot.cli", "run")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    named = {line.split(": ")[2] for line in proc.stderr.strip().splitlines()}
    assert {"BACKUP_KEEP", "LOG_LEVEL", "TIMEZONE", "TELEGRAM_BOT_TOKEN"} <= named
    assert "MCP_CONFIG" in proc.stderr  # the file-system check ran too
    assert "LLM_MODEL is not set" in proc.stderr  # and the required ones


@pytest.mark.db
def test_misspelled_names_get_did_you_mean(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text("LLM_MODLE=m\nSEARXNG_ULR=http://x\nSEARXNG_SECRET=s\n")
    env = {"BUDGET_USDD": "1/day", "TELEGRAM_TOKEN": "x", "LANG": "C.UTF-8", "LLAMA_X": "1"}
    proc = sidekick(tmp_path, "bot.cli", "migrate", **env)
    assert proc.returncode == 0, proc.stderr
    err = proc.stderr
    assert "LLM_MODLE is not a setting; did you mean LLM_MODEL?" in err
    assert "SEARXNG_ULR is not a setting; did you mean SEARXNG_URL?" in err
    assert "BUDGET_USDD is not a setting; did you mean BUDGET_USD?" in err
    assert "TELEGRAM_TOKEN is not a setting; did you mean TELEGRAM_BOT_TOKEN?" in err
    # Unrelated environment variables and compose's own keys are left alone.
    assert "LANG" not in err and "LLAMA_X" not in err and "SEARXNG_SECRET" not in err


@sqlite_only
@pytest.mark.db
def test_outside_the_project_folder_no_database_is_made_silently(tmp_path: Path) -> None:
    proc = sidekick(tmp_path, "bot.cli", "usage")
    assert proc.returncode == 2
    assert "no database at" in proc.stderr and "settings from the environment only" in proc.stderr
    assert not (tmp_path / "data" / "sidekick.db").exists()
    (tmp_path / ".env").write_text("LLM_MODEL=m\n")  # the project folder: usage works there
    proc = sidekick(tmp_path, "bot.cli", "usage")
    assert proc.returncode == 0, proc.stderr
    assert "environment only" not in proc.stderr
