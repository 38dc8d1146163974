"""`sidekick doctor` says what a person needs to fix: the /v1 in the URL, the models that exist,
and which database file it opened."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build_app
from bot.llm import client as llm_client
from bot.ops.doctor import check_database, check_llm
from tests.conftest import make_settings, sqlite_only
from tests.fakes.openai_server import FakeOpenAI

pytestmark = pytest.mark.db  # every test here opens its own database


async def test_llm_url_without_v1_asks_about_it(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    base = fake_llm.base_url.removesuffix("/v1")
    app = await build_app(make_settings(tmp_path, fake_llm, llm_base_url=base))
    try:
        (result,) = await check_llm(app)
    finally:
        await app.close()
    assert not result.ok and result.detail == "HTTP 404 for /models"
    assert result.fix == f"wrong path: does LLM_BASE_URL ({base}) end in /v1?"


async def test_unknown_model_lists_the_ones_that_exist(
    tmp_path: Path, fake_llm: FakeOpenAI
) -> None:
    fake_llm.models = ["fake-model", "other-model"]
    app = await build_app(make_settings(tmp_path, fake_llm, llm_model="gpt-nope"))
    try:
        endpoint, model = await check_llm(app)
    finally:
        await app.close()
    assert endpoint.ok and not model.ok
    assert model.detail == "model 'gpt-nope' not found"
    assert model.fix == "these exist: fake-model, other-model"


async def test_unreachable_llm_says_so(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(llm_client, "MAX_RETRIES", 0)
    app = await build_app(make_settings(tmp_path, None))
    try:
        (result,) = await check_llm(app)
    finally:
        await app.close()
    assert not result.ok and result.detail.startswith("cannot connect to http://127.0.0.1:9/v1")


@sqlite_only  # on PostgreSQL there is no file: the URL is shown, password masked
async def test_database_check_names_the_file(tmp_path: Path, fake_llm: FakeOpenAI) -> None:
    app = await build_app(make_settings(tmp_path, fake_llm))
    try:
        database = (await check_database(app))[0]
    finally:
        await app.close()
    assert database.ok
    assert database.detail == f"{(tmp_path / 'data' / 'sidekick.db').resolve()} (exists)"


async def test_each_start_up_line_is_said_once_in_a_doctor_run(
    tmp_path: Path, fake_llm: FakeOpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The code tool's line came twice: the app's tool and doctor's own trial service."""
    import logging

    from bot.ops.doctor import all_checks

    with caplog.at_level(logging.INFO):
        app = await build_app(make_settings(tmp_path, fake_llm))
        try:
            for check in all_checks(app.features):
                await check(app)
        finally:
            await app.close()
    ours = ("bot.", "tools.", "db.", "scheduler.")
    said = [
        r.getMessage()
        for r in caplog.records
        if r.levelno >= logging.INFO and r.name.startswith(ours)
    ]
    repeated = {m for m in said if said.count(m) > 1}
    assert not repeated, repeated
