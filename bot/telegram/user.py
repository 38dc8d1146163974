"""The sender as the app knows them, resolved once per update for the routers that ask.

A router opts in with `use_user(router)`; its handlers then take `user: ChatUser`
instead of looking the user up themselves. The chat router does not: the agent finds the
user in the same transaction that stores the message.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from zoneinfo import ZoneInfo

from aiogram import BaseMiddleware, Router
from aiogram.types import TelegramObject, User

from bot.app import App
from bot.telegram.middlewares import Handler
from db.repos import core as core_repo


@dataclass(frozen=True)
class ChatUser:
    id: int  # users.id
    telegram_id: int
    name: str
    tz: ZoneInfo


class UserMiddleware(BaseMiddleware):
    """Runs after the filters matched (an inner middleware), so only handled updates pay."""

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        who: User | None = data.get("event_from_user")
        if who is not None:
            app: App = data["app"]
            async with app.session_factory() as s, s.begin():
                row = await core_repo.get_or_create_user(s, who.id, who.full_name, app.deps.clock())
            zone = app.settings.session_policy.zone(row.timezone)
            data["user"] = ChatUser(row.id, who.id, who.full_name, zone)
        return await handler(event, data)


def use_user(router: Router) -> Router:
    router.message.middleware(UserMiddleware())
    router.callback_query.middleware(UserMiddleware())
    return router
