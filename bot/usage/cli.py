"""`sidekick usage [--user TELEGRAM_ID]`: the /usage report in the terminal (everyone by
default), with the budgets in dollars."""

from __future__ import annotations

from bot.config import Settings
from bot.usage.meter import Meter
from bot.usage.report import usage_text
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core as core_repo
from tools.base import system_clock


async def print_usage(settings: Settings, telegram_user_id: int | None = None) -> int:
    engine = create_engine(settings.db_url)
    try:
        await upgrade(engine)
        sf = session_factory(engine)
        meter = Meter(settings, sf, system_clock, settings.tz)
        user_id = None
        if telegram_user_id is not None:
            async with sf() as s:
                users = await core_repo.user_with_open_session(s, telegram_user_id)
            if users[0] is None:
                print(f"no user with Telegram id {telegram_user_id}")
                return 1
            user_id = users[0].id
        who = "everyone" if user_id is None else f"Telegram user {telegram_user_id}"
        print(f"Model usage ({who})")
        print(await usage_text(meter, user_id, amounts=True))
        return 0
    finally:
        await engine.dispose()
