"""The OpenCode tier: the real OpenCode binary, run by the assembled app in its sandbox,
against the fake model server (`make test-opencode`).

Not part of `make test`: every test here is skipped unless SIDEKICK_OPENCODE=1 (which
`make test-opencode` sets after `make install-opencode` installed it; SIDEKICK_OPENCODE_DIR
points at another install). OpenCode's model calls reach the fake through the bot's relay;
`lane` scripts them apart from the bot's own (a Lane of the fake: OpenCode's tool calls
and its title requests).
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from bot.telegram.delivery import TelegramDelivery
from tests.e2e.conftest import TG, make_tg, telegram_server  # noqa: F401  (fixtures)
from tests.fakes.openai_server import FakeOpenAI, Lane, Text
from tools.code.opencode import OpenCodeInstall, locate_opencode

HERE = Path(__file__).parent
ENABLED = os.environ.get("SIDEKICK_OPENCODE") == "1"
OPENCODE_TOOLS = {"bash", "write", "read"}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    skip = pytest.mark.skip(reason="the OpenCode tier: run `make test-opencode`")
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)
            if not ENABLED:
                item.add_marker(skip)


@pytest.fixture(scope="session")
def installed() -> OpenCodeInstall:
    found = locate_opencode()
    if found is None:
        pytest.fail("OpenCode is not installed: run `make test-opencode`")
    return found


def from_opencode(body: dict[str, Any]) -> bool:
    """OpenCode's agent: its own tools offered."""
    names = {t.get("function", {}).get("name") for t in body.get("tools") or ()}
    return OPENCODE_TOOLS <= names


def titles(body: dict[str, Any]) -> bool:
    """OpenCode's title generator (asked beside the agent: it takes no scripted turn)."""
    system = next((m for m in body.get("messages", []) if m.get("role") == "system"), None)
    return system is not None and "title generator" in str(system.get("content"))


@pytest.fixture
def lane(fake_llm: FakeOpenAI) -> Lane:
    fake_llm.lanes.append(Lane(titles, after=lambda body: Text("A title")))
    found = Lane(from_opencode, after=lambda body: Text("Finished."))
    fake_llm.lanes.append(found)
    return found


async def delivering(tg: TG) -> TG:
    """The features' parts started, as `sidekick run` does: finished jobs are sent."""
    await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))
    return tg


@pytest.fixture
async def oc(installed: OpenCodeInstall, make_tg: Callable[..., Awaitable[TG]]) -> TG:  # noqa: F811
    # Code with network access and nobody to press Allow.
    return await delivering(await make_tg(approvals="off", code_generator="opencode"))
