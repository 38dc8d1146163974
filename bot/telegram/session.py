"""The Bot API session: one malformed update in a getUpdates answer is skipped, not fatal.

aiogram validates a getUpdates answer as a whole: one entry that does not validate (a
Telegram-compatible server's bug, or a hostile one) fails the whole batch, polling retries
the same batch forever (nobody is served), and the error it logs carries the raw answer:
every user's text in it. Here, only when that happens, each entry is validated on its own;
one that fails is replaced by its bare update id (so the offset moves past it and nothing
handles it) and logged with where it failed, never its values.

Every answer (and every webhook body: aiogram reads those with the session's json_loads
too) is parsed with lone surrogates replaced (bot/surrogates.py): a message carrying one
could not be stored or sent to the model.
"""

from __future__ import annotations

import json
import logging
from typing import Any

from aiogram import Bot
from aiogram.client.session.aiohttp import AiohttpSession
from aiogram.exceptions import ClientDecodeError
from aiogram.methods import GetUpdates, TelegramMethod
from aiogram.methods.base import Response, TelegramType
from aiogram.types import Update
from pydantic import ValidationError

from bot.surrogates import scrub_json

log = logging.getLogger(__name__)


def json_loads(content: str | bytes) -> Any:
    data = json.loads(content)
    # Cheap for the usual answer: a lone surrogate can only come from a \u escape.
    escaped = "\\ud" in content or "\\uD" in content if isinstance(content, str) else True
    return scrub_json(data) if escaped else data


class SkippingSession(AiohttpSession):
    def __init__(self, **kwargs: Any) -> None:
        super().__init__(json_loads=json_loads, **kwargs)

    def check_response(
        self, bot: Bot, method: TelegramMethod[TelegramType], status_code: int, content: str
    ) -> Response[TelegramType]:
        try:
            return super().check_response(bot, method, status_code, content)
        except ClientDecodeError as exc:
            updates = isinstance(method, GetUpdates)  # (a check that would narrow `method`)
            if not updates:
                raise
            cleaned = self._without_bad_entries(bot, content)
            if cleaned is None:
                # Nothing to save: fail without the answer's text (users' messages) in it.
                raise ClientDecodeError(
                    "getUpdates answer could not be read", exc.original, "(not logged)"
                ) from None
        return super().check_response(bot, method, status_code, cleaned)

    def _without_bad_entries(self, bot: Bot, content: str) -> str | None:
        try:
            data = self.json_loads(content)
        except ValueError:
            return None
        entries = data.get("result") if isinstance(data, dict) else None
        if not isinstance(entries, list):
            return None
        kept: list[Any] = []
        for entry in entries:
            try:
                Update.model_validate(entry, context={"bot": bot})
            except ValidationError as exc:
                update_id = entry.get("update_id") if isinstance(entry, dict) else None
                where = sorted({".".join(map(str, e["loc"])) for e in exc.errors()})[:5]
                log.warning(
                    "skipped a malformed update (update_id %s): %d field(s) failed: %s",
                    update_id,
                    exc.error_count(),
                    ", ".join(where),
                )
                if isinstance(update_id, int) and not isinstance(update_id, bool):
                    kept.append({"update_id": update_id})
                continue
            kept.append(entry)
        data["result"] = kept
        out: str = self.json_dumps(data)
        return out
