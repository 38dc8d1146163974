"""The browser tier: the assembled app's dashboard driven by a real browser (Debian's
chromium, headless, through chromedriver's WebDriver protocol), each page's screenshot
saved (`make test-browser`, which installs both where it may).

Not part of `make test`: skipped unless SIDEKICK_BROWSER=1. Screenshots go to
SIDEKICK_SCREENSHOTS (default build/screenshots) and are named in each test's report."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from tests.browser.webdriver import Browser, installed
from tests.e2e.conftest import TG, make_tg, telegram_server  # noqa: F401  (fixtures)

HERE = Path(__file__).parent
ENABLED = os.environ.get("SIDEKICK_BROWSER") == "1"
SHOTS = Path(os.environ.get("SIDEKICK_SCREENSHOTS", HERE.parents[1] / "build" / "screenshots"))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="the browser tier: run `make test-browser`")
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
            if not ENABLED:
                item.add_marker(skip)


@pytest.fixture
async def browser(tmp_path: Path) -> AsyncIterator[Browser]:
    found = installed()
    if found is None:
        pytest.fail(
            "chromium and chromedriver are not installed: `make test-browser` installs them"
        )
    b = await Browser.start(*found, tmp_path / "profile")
    yield b
    await b.close()
