"""The allow-list's memory copy and the .env writer behind pairing and setup.

Two AccessLists on one database stand for two workers: a person let in by one is served by
the other at once (an unknown id reads the table again), a removal is seen within the
refresh time. The .env writer keeps every other line, quotes what needs it, and removes."""

from __future__ import annotations

import stat
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.access import gate, repo
from bot.access.gate import AccessList
from bot.app import App
from bot.ops.envfile import mask, read_env, set_values
from tests.polling import until


async def test_another_worker_sees_a_yes_at_once_and_a_removal_soon(
    app: App, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(gate, "REFRESH_S", 0.2)
    sf, now = app.session_factory, datetime.now(UTC)
    here, there = AccessList((1,), sf), AccessList((1,), sf)
    assert await here.owner() == 1 and await there.owner() == 1
    assert not await there.allows_user(42)  # read into memory, 42 not in it
    assert await repo.request(sf, 42, "user", "Ann", 42, now) == "asked"
    assert await repo.request(sf, 42, "user", "Ann", 42, now) == "pending"
    _, changed = await repo.decide(sf, 42, "allowed", 1, now)
    here.invalidate()
    assert changed and await here.allows_user(42)
    await until(
        lambda: there.allows_user(42), "the yes seen elsewhere"
    )  # an unknown id reads the table again
    _, changed = await repo.decide(sf, 42, "removed", 1, now)
    assert changed

    async def gone() -> bool:
        return not await there.allows_user(42)

    await until(gone, "the removal seen elsewhere")
    assert await repo.request(sf, 42, "user", "Ann", 42, now) == "denied"  # for a while


async def test_the_owner_is_learned_once(app: App) -> None:
    sf, now = app.session_factory, datetime.now(UTC)
    first, second = AccessList((), sf), AccessList((), sf)
    assert await first.owner() is None
    assert await first.learn_owner(7, "Ann", now)
    assert not await second.learn_owner(8, "Bob", now)
    assert await second.owner() == 7 and await second.allows_user(7)
    assert not await second.allows_user(8)
    assert not await AccessList((5,), sf).learn_owner(9, "Eve", now)  # a seed list: never


def test_env_writer_keeps_other_lines_and_is_owner_only(tmp_path: Path) -> None:
    env = tmp_path / ".env"
    env.write_text(
        "# top\nexport LLM_MODEL=old  # a note\nTIMEZONE='Europe/Paris'\n\n"
        "LLM_API_KEY=sk-1\nLLM_MODEL=twice\n"
    )
    assert read_env(env)["LLM_MODEL"] == "twice" and read_env(env)["TIMEZONE"] == "Europe/Paris"
    set_values(env, {"LLM_MODEL": "new model", "LLM_API_KEY": None, "SEARXNG_URL": "http://s"})
    assert env.read_text() == (
        "# top\nLLM_MODEL=\"new model\"\nTIMEZONE='Europe/Paris'\n\nSEARXNG_URL=http://s\n"
    )
    assert read_env(env)["LLM_MODEL"] == "new model"
    assert stat.S_IMODE(env.stat().st_mode) == 0o600
    assert mask("123456789:AAE-secret-0000") == "••••0000" and mask("short") == "••••"
