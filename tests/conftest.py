"""Shared fixtures: settings on a temp data dir, the fake model server, a built App."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from bot.app import App, build_app
from bot.config import Settings, load_settings
from bot.llm.client import LLMClient
from tests.fakes.openai_server import FakeOpenAI


@pytest.fixture(autouse=True)
def _clean_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """No test reads the developer's .env or environment settings."""
    monkeypatch.chdir(tmp_path)
    for name in list(Settings.model_fields):
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
async def fake_llm() -> AsyncIterator[FakeOpenAI]:
    server = await FakeOpenAI().start()
    yield server
    await server.stop()


def make_settings(tmp_path: Path, fake_llm: FakeOpenAI | None = None, **extra: Any) -> Settings:
    values: dict[str, Any] = {
        "data_dir": tmp_path / "data",
        "llm_base_url": fake_llm.base_url if fake_llm else "http://127.0.0.1:9/v1",
        "llm_api_key": "sk-test-secret-key-123456",
        "llm_model": "fake-model",
        "llm_max_retries": 2,
        **extra,
    }
    return load_settings(**values)


@pytest.fixture
def settings(tmp_path: Path, fake_llm: FakeOpenAI) -> Settings:
    return make_settings(tmp_path, fake_llm)


@pytest.fixture
async def app(settings: Settings) -> AsyncIterator[App]:
    llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.05)
    built = await build_app(settings, llm=llm)
    yield built
    await built.close()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Everything under tests/e2e is the slow tier: `pytest -m "not e2e"` is the quick loop."""
    for item in items:
        if "e2e" in item.path.parts:
            item.add_marker(pytest.mark.e2e)
