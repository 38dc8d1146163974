"""Shared fixtures: settings on a temp data dir, the fake model server, a built App."""

from __future__ import annotations

import asyncio
import itertools
import os
import shutil
import tempfile
import threading
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.engine import make_url
from sqlalchemy.ext.asyncio import AsyncEngine

from bot.app import App, build_app
from bot.config import Settings, load_settings
from bot.llm import client as llm_client
from bot.llm.client import LLMClient
from bot.ops.former_settings import RENAMED
from db.engine import create_engine
from db.migrate import upgrade
from tests.fakes.openai_server import FakeOpenAI

# `make test-pg` runs the suite with DATABASE_URL naming a throwaway PostgreSQL server: each
# test then gets a database of its own, created empty (pgvector comes from template1) and
# dropped afterwards. Without it every test uses SQLite in its temp DATA_DIR.
PG_SERVER = (
    os.environ.get("DATABASE_URL", "") if "postgres" in os.environ.get("DATABASE_URL", "") else ""
)
ON_PG = bool(PG_SERVER)
_numbers = itertools.count()

sqlite_only = pytest.mark.skipif(ON_PG, reason="SQLite-specific (make test-pg runs PostgreSQL)")
pg_only = pytest.mark.skipif(not ON_PG, reason="needs PostgreSQL (make test-pg)")


async def _admin(sql: str) -> None:
    import asyncpg

    url = make_url(PG_SERVER)
    conn = await asyncpg.connect(
        host=url.host, port=url.port, user=url.username, password=url.password,
        database=url.database or "postgres",
    )  # fmt: skip
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


def pg_database() -> Iterator[str]:
    """A fresh PostgreSQL database URL for one test (dropped afterwards)."""
    name = f"t{os.getpid()}_{next(_numbers)}"
    asyncio.run(_admin(f"CREATE DATABASE {name}"))
    try:
        yield make_url(PG_SERVER).set(database=name).render_as_string(hide_password=False)
    finally:
        asyncio.run(_admin(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """No test reads the developer's .env or environment settings (but DATABASE_URL points at
    a database of the test's own under make test-pg)."""
    monkeypatch.chdir(tmp_path)
    # Two retries instead of four: a test of a failing model fails over sooner.
    monkeypatch.setattr(llm_client, "MAX_RETRIES", 2)
    for name in [*Settings.model_fields, *RENAMED]:
        monkeypatch.delenv(name.upper(), raising=False)
    if not ON_PG:
        yield
        return
    for url in pg_database():
        monkeypatch.setenv("DATABASE_URL", url)
        yield


@pytest.fixture(autouse=True, scope="session")
def _no_tls_linger_on_close() -> Iterator[None]:
    """aiogram's session close waits 250 ms for TLS connections to finish closing; the fake
    Telegram speaks plain HTTP on loopback, and each e2e test closes a bot or two (more
    than a minute of the suite's sleeping). The close itself is aiogram's, unchanged."""
    from bot.telegram.session import SkippingSession  # the bot's session (aiogram's + parsing)

    async def close(self: SkippingSession) -> None:
        if self._session is not None and not self._session.closed:
            await self._session.close()

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(SkippingSession, "close", close)
        yield


@pytest.fixture
async def engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """The test's database, migrated: SQLite, or PostgreSQL under make test-pg."""
    eng = create_engine(make_settings(tmp_path).db_url)
    await upgrade(eng)
    try:
        yield eng
    finally:
        await eng.dispose()


@pytest.fixture
async def sqlite_engine(tmp_path: Path) -> AsyncIterator[AsyncEngine]:
    """A migrated SQLite database of its own, for tests of SQLite's own paths (under
    `make test-pg` too)."""
    engine = create_engine(f"sqlite+aiosqlite:///{tmp_path / 't.db'}")
    await upgrade(engine)
    try:
        yield engine
    finally:
        await engine.dispose()


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    server = await FakeOpenAI().start()
    yield server
    await server.stop()


_template: Path | None = None


def migrated_template() -> Path:
    """One SQLite database migrated to head, made once per test run: each test's database
    starts as a copy of it rather than running every migration again (a second or so per
    test; the migrations themselves are proven by test_migrations_head.py and
    test_upgrade.py)."""
    global _template
    if _template is None:
        path = Path(tempfile.mkdtemp(prefix="sidekick-template-")) / "sidekick.db"

        async def build() -> None:
            engine = create_engine(f"sqlite+aiosqlite:///{path}")
            try:
                await upgrade(engine)
            finally:
                await engine.dispose()

        # make_settings is called inside running event loops too: the template gets its own.
        worker = threading.Thread(target=lambda: asyncio.run(build()))
        worker.start()
        worker.join()
        if not path.exists():
            raise RuntimeError("the test database template could not be built")
        _template = path
    return _template


def make_settings(tmp_path: Path, fake_llm: FakeOpenAI | None = None, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "llm_base_url": fake_llm.base_url if fake_llm else "http://127.0.0.1:9/v1",
        "llm_api_key": "sk-test-secret-key-123456",
        "llm_model": "fake-model",
        # `generate` as one model call, also where OpenCode is installed: its own tier
        # (tests/opencode) asks for it.
        "code_generator": "model",
        **extra,
    }
    settings = load_settings(**values)
    if settings.database_url is None and not (settings.data_dir / "sidekick.db").exists():
        migrated_copy(settings.data_dir)
    return settings


def migrated_copy(data_dir: Path) -> Path:
    """DATA_DIR/sidekick.db as a copy of the template: the database `sidekick migrate`
    makes (the same tables, views and triggers), for a test of something else."""
    data_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    db_file = data_dir / "sidekick.db"
    shutil.copyfile(migrated_template(), db_file)
    _copies[db_file.resolve()] = _stamp(db_file)
    return db_file


# The databases make_settings copied from the template, as they were then: one changed
# since, or made otherwise, was written by the test or a process it started.
_copies: dict[Path, tuple[int, int]] = {}


def _stamp(path: Path) -> tuple[int, int]:
    st = path.stat()
    return st.st_mtime_ns, st.st_size


def _written_databases(tmp_path: Path) -> list[Path]:
    written = []
    for path in tmp_path.rglob("sidekick.db"):
        try:
            if _copies.get(path.resolve()) != _stamp(path):
                written.append(path)
        except OSError:
            continue
    return written


@pytest.fixture
def settings(tmp_path: Path, fake_llm: FakeOpenAI) -> Settings:
    return make_settings(tmp_path, fake_llm)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[App]:
    llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.05)
    built = await build_app(settings, llm=llm)
    yield built
    await built.close()


# Fixtures that open the test's own database (SQLite in DATA_DIR, or PostgreSQL under
# `make test-pg`) or build the app on it: a test that asks for one, directly or through
# another fixture, is a database test (marker `db`). A test that opens it some other way
# (make_settings + create_engine, a child `python -m bot`) carries the marker itself;
# `make test` fails one that does so unmarked (_database_use_is_marked below).
DATABASE_FIXTURES = {"engine", "app", "env", "make_tg", "tg"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Everything under tests/e2e is the slow tier: `pytest -m "not e2e"` is the quick loop.
    It is also the assembled app, hence database tests, as are the users of DATABASE_FIXTURES.
    Under `make test-pg` only database tests run: the rest never reach PostgreSQL and
    `make test` already ran them."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.e2e)
            item.add_marker(pytest.mark.db)
        elif item.path.parent.name in ("real", "opencode"):  # their tiers' assembled apps
            item.add_marker(pytest.mark.db)
        elif DATABASE_FIXTURES & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.db)
    if not ON_PG:
        return
    keep = [item for item in items if item.get_closest_marker("db")]
    left = [item for item in items if not item.get_closest_marker("db")]
    if left:
        config.hook.pytest_deselected(items=left)
        items[:] = keep


def _default_database(url: str, tmp_path: Path) -> bool:
    """A SQLite URL naming what settings.db_url names (DATA_DIR/sidekick.db) inside this
    test's folder: the database that is PostgreSQL under `make test-pg`."""
    parsed = make_url(url)
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return False
    path = Path(parsed.database)
    return path.name == "sidekick.db" and tmp_path.resolve() in path.resolve().parents


@pytest.fixture(autouse=True)
def _database_use_is_marked(
    request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> Iterator[None]:
    """Under `make test`: a test that opens its own database without the `db` marker fails
    (in this process, or written by a child such as `python -m bot`), as `make test-pg`
    would skip it and never run it on PostgreSQL."""
    if ON_PG or request.node.get_closest_marker("db"):
        yield
        return
    from db import engine as db_engine

    opened: list[str] = []
    real = db_engine.create_async_engine

    def create_async_engine(url: Any, *args: Any, **kwargs: Any) -> Any:
        if _default_database(str(url), tmp_path):
            opened.append(str(url))
        return real(url, *args, **kwargs)

    monkeypatch.setattr(db_engine, "create_async_engine", create_async_engine)
    yield
    opened += map(str, _written_databases(tmp_path))
    if opened:
        pytest.fail(
            f"{request.node.nodeid} opens the test's database ({opened[0]}) but is not marked "
            "`db`: mark it (pytestmark = pytest.mark.db) so `make test-pg` runs it on "
            "PostgreSQL, or ask for one of DATABASE_FIXTURES in tests/conftest.py",
            pytrace=False,
        )
