"""`sidekick doctor`'s search rows: configured backends, one real query each, admin fixes."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from bot.ops.doctor import all_checks, format_table
from tests.conftest import make_settings
from tests.fakes.search_server import FakeSearch, Reply, fixture
from tools.search import brave
from tools.search.doctor import check_search

KEY = "BSA-doctor-key-987654"
WEB = "/res/v1/web/search"


@pytest.fixture
async def server(monkeypatch: pytest.MonkeyPatch) -> AsyncIterator[FakeSearch]:
    fake = await FakeSearch().start()
    fake.serve("/search", Reply(fixture("searxng_web.json")))
    fake.serve(WEB, Reply(fixture("brave_web.json")))
    monkeypatch.setattr(brave, "API_URL", fake.root + "/res/v1")
    yield fake
    await fake.stop()


@pytest.fixture
async def http() -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient() as client:
        yield client


def test_doctor_runs_the_search_check() -> None:
    assert "check_search" in [check.__name__ for check in all_checks()]


async def test_not_configured_is_fine_and_says_how(tmp_path: Path, http: httpx.AsyncClient) -> None:
    rows = await check_search(make_settings(tmp_path), http)
    assert len(rows) == 1 and rows[0].ok
    assert "SEARXNG_URL" in rows[0].detail and "BRAVE_API_KEY" in rows[0].detail


async def test_both_backends_queried_once_each(
    tmp_path: Path, http: httpx.AsyncClient, server: FakeSearch
) -> None:
    settings = make_settings(tmp_path, searxng_url=server.root, brave_api_key=KEY)
    rows = await check_search(settings, http)
    assert [(r.name, r.ok) for r in rows] == [
        ("search: searxng (primary)", True),
        ("search: brave (fallback)", True),
    ]
    assert "3 results" in rows[0].detail and server.root in rows[0].detail
    assert server.count("/search") == 1 and server.count(WEB) == 1
    assert KEY not in format_table(rows)


async def test_searxng_403_tells_the_admin_to_enable_json(
    tmp_path: Path, http: httpx.AsyncClient, server: FakeSearch
) -> None:
    server.serve("/search", Reply("<html>Forbidden</html>", status=403))
    rows = await check_search(make_settings(tmp_path, searxng_url=server.root), http)
    assert not rows[0].ok and "403" in rows[0].detail
    assert "search.formats" in rows[0].fix
    assert "fix: add json to search.formats" in format_table(rows)


async def test_no_results_is_a_failure_with_a_hint(
    tmp_path: Path, http: httpx.AsyncClient, server: FakeSearch
) -> None:
    server.serve("/search", Reply(fixture("searxng_no_results.json")))
    rows = await check_search(make_settings(tmp_path, searxng_url=server.root), http)
    assert not rows[0].ok and "0 results" in rows[0].detail and "engines" in rows[0].fix
