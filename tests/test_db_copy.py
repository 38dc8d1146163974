"""`sidekick migrate --from --to`: a whole install copied, counts verified, memory still found.

Under `make test` the target is a second SQLite file; under `make test-pg` it is the test's
PostgreSQL database, and the copy goes back to SQLite again (a round trip)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bot.features import metadata
from db.copy import CopyError, copy_database
from db.engine import create_engine, session_factory
from tests.conftest import ON_PG
from tests.test_memory_store import make_env, put
from tools.memory import repo
from tools.memory.copy import INDEX
from tools.memory.embeddings import WordLlamaEmbedder
from tools.memory.store import MemoryStore


def sqlite(path: Path) -> str:
    return f"sqlite+aiosqlite:///{path}"


async def filled(tmp_path: Path) -> str:
    """A SQLite install with two users, sessions and memories; returns its URL."""
    url = sqlite(tmp_path / "source.db")
    env, engine = await make_env(tmp_path, database_url=url)
    await put(env, "Sister Anna lives in Toronto")
    await put(env, "Allergic to peanuts", user=1)
    await put(env, "The door code of the garage is 9052", layer="session")
    await engine.dispose()  # type: ignore[attr-defined]
    return url


async def found(url: str, tmp_path: Path, query: str) -> list[str]:
    engine = create_engine(url)
    try:
        env, other = await make_env(tmp_path / "probe", database_url=url)
        await other.dispose()  # type: ignore[attr-defined]
        store = MemoryStore(session_factory(engine), WordLlamaEmbedder(), env.settings, env.clock)
        hits = await store.recall(user_id=1, query=query)
        return [h.content for h in hits]
    finally:
        await engine.dispose()


async def test_copy_round_trips_with_counts_and_recall(tmp_path: Path) -> None:
    source = await filled(tmp_path)
    target = os.environ["DATABASE_URL"] if ON_PG else sqlite(tmp_path / "target.db")
    said: list[str] = []
    counts = await copy_database(source, target, metadata(), (INDEX,), said.append)
    by_table = {c.table: c for c in counts}
    assert by_table["memories"].target == 3 and by_table["memory_vec"].target == 3
    assert by_table["users"].target >= 2 and all(c.source == c.target for c in counts)
    assert "copied memories" in said
    back = sqlite(tmp_path / "back.db")
    again = await copy_database(target, back, metadata(), (INDEX,))
    assert {c.table: c.target for c in again} == {c.table: c.target for c in counts}
    # The copied vectors and words still find the memory, and new rows get fresh ids.
    assert "Sister Anna lives in Toronto" in await found(
        target, tmp_path, "where does my sister live"
    )
    async with session_factory(engine := create_engine(target))() as s:
        assert len(await repo.vectors_of(s, [1, 2, 3])) == 3
    await engine.dispose()


async def test_copy_reads_a_big_table_in_pages(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A table of more rows than a page comes over whole, page after page (a read holds its
    rows in memory, so a table is never read in one)."""
    source = await filled(tmp_path)
    monkeypatch.setattr("db.copy.BATCH", 2)
    counts = await copy_database(source, sqlite(tmp_path / "paged.db"), metadata(), (INDEX,))
    by_table = {c.table: c for c in counts}
    assert by_table["memories"].target == 3 and by_table["users"].target >= 2
    assert all(c.source == c.target for c in counts)


async def test_copy_refuses_a_target_with_data(tmp_path: Path) -> None:
    source = await filled(tmp_path)
    target = sqlite(tmp_path / "target.db")
    await copy_database(source, target, metadata(), (INDEX,))
    with pytest.raises(CopyError, match="not empty"):
        await copy_database(source, target, metadata(), (INDEX,))


def test_cli_copy_prints_the_verified_counts(tmp_path: Path) -> None:
    import asyncio

    source = asyncio.run(filled(tmp_path))
    target = tmp_path / "cli.db"
    proc = subprocess.run(
        [sys.executable, "-m", "bot.cli", "migrate", "--from",
         "sqlite:///" + source.split(":///", 1)[1], "--to", f"sqlite:///{target}"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert "memories: 3 row(s)" in proc.stdout and "copy verified" in proc.stdout
    again = subprocess.run(
        [sys.executable, "-m", "bot.cli", "migrate", "--to", f"sqlite:///{target}"],
        cwd=tmp_path, env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path)},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert again.returncode == 2 and "--from" in again.stderr
