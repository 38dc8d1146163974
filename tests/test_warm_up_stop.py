"""A stop while the app still warms up (bot/app.py): what is left of the warm-up is not
waited for, as nobody will use it; a load already running in a thread ends on its own."""

from __future__ import annotations

import asyncio
import threading

import pytest

from bot.app import build_app
from bot.config import Settings
from bot.features import FEATURES
from tests.e2e.conftest import WAIT_S
from tools.feature import Feature, Host, Setup

pytestmark = pytest.mark.db


async def test_a_stop_during_warm_up_cancels_the_rest_of_it(settings: Settings) -> None:
    loading, loaded = threading.Event(), threading.Event()
    warmed: list[str] = []

    async def slow_load(host: Host) -> None:
        def load() -> None:
            loading.set()
            loaded.wait(2 * WAIT_S)

        await asyncio.to_thread(load)
        warmed.append("slow load")

    async def next_step(host: Host) -> None:
        warmed.append("next step")

    slow = Feature(name="slow-warm-up", setup=lambda: Setup(warm=(slow_load, next_step)))
    app = await build_app(settings, features=(*FEATURES, slow))
    try:
        app.warm_up()
        assert await asyncio.to_thread(loading.wait, WAIT_S)
        # Were the stop to wait for the warm-up, it would wait for `loaded`, set only below.
        await asyncio.wait_for(app.close(), WAIT_S)
        assert app.warming is not None and app.warming.cancelled()
        assert warmed == [] and not loaded.is_set()
    finally:
        loaded.set()
