"""Model Markdown → Telegram text + entities, split at 4096 UTF-16 units, sent robustly.

No parse_mode anywhere: telegramify-markdown turns Markdown into plain text plus entities,
so `<`, `&` and stray `*` need no escaping and cannot break a message. A chunk Telegram
still rejects (400) is resent as plain text; 429 waits `retry_after` and retries (bounded).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from aiogram import Bot
from aiogram.exceptions import (
    TelegramBadRequest,
    TelegramNetworkError,
    TelegramRetryAfter,
    TelegramServerError,
)
from aiogram.types import BufferedInputFile, InlineKeyboardMarkup, Message, MessageEntity
from telegramify_markdown import convert, split_entities
from telegramify_markdown.entity import utf16_len
from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    wait_exponential,
)

from bot.shown import shown

log = logging.getLogger(__name__)

MAX_UTF16 = 4096
MAX_ATTEMPTS = 5
MAX_RETRY_AFTER_S = 60.0
T = TypeVar("T")

Chunk = tuple[str, list[MessageEntity]]


def render(markdown: str, limit: int = MAX_UTF16) -> list[Chunk]:
    """Convert Markdown and split it into chunks Telegram accepts (no chunk is whitespace),
    bidi controls escaped (bot/shown.py) before the entities are measured."""
    markdown = shown(markdown)
    try:
        text, entities = convert(markdown)
        parts = split_entities(text, entities, limit)
        chunks = [(t, [MessageEntity(**e.to_dict()) for e in ents]) for t, ents in parts]
    except Exception:
        # The converter is third-party code: a crash there must not lose the answer.
        log.exception("markdown conversion failed; sending plain text")
        chunks = [(t, []) for t in split_plain(markdown, limit)]
    return chunks or [("(empty answer)", [])]


def split_plain(text: str, limit: int = MAX_UTF16) -> list[str]:
    """Split text without entities, at newlines where possible, never inside a character;
    bidi controls escaped (bot/shown.py)."""
    pieces = split_entities(shown(text), [], limit)
    return [t for t, _ in pieces]


def tail(markdown: str, limit: int = MAX_UTF16) -> Chunk:
    """The last chunk of a partial answer: what a draft shows while the text still grows."""
    chunks = render(markdown, limit)
    return chunks[-1]


def _wait(state: RetryCallState) -> float:
    """Telegram's retry_after for a 429 (capped), else 0.5 s doubling up to 8 s."""
    exc = state.outcome.exception() if state.outcome else None
    if isinstance(exc, TelegramRetryAfter):
        return min(float(exc.retry_after), MAX_RETRY_AFTER_S)
    return float(_BACKOFF(state))


_BACKOFF = wait_exponential(multiplier=0.5, max=8.0)
_RETRIED = (TelegramRetryAfter, TelegramNetworkError, TelegramServerError)


async def with_retry(call: Callable[[], Awaitable[T]], what: str = "telegram call") -> T:
    """Run a Bot API call, waiting out 429 and retrying network/5xx errors, bounded."""

    def note(state: RetryCallState) -> None:
        exc = state.outcome.exception() if state.outcome else None
        delay = state.next_action.sleep if state.next_action else 0.0
        if isinstance(exc, TelegramRetryAfter):
            log.warning("%s: Telegram asked to wait %.0f s (429)", what, delay)
        else:
            log.warning("%s failed (%s); retrying", what, type(exc).__name__)

    retrying = AsyncRetrying(
        stop=stop_after_attempt(MAX_ATTEMPTS),
        retry=retry_if_exception_type(_RETRIED),
        wait=_wait,
        before_sleep=note,
        reraise=True,
    )

    async def once() -> T:  # tenacity awaits only what a coroutine function returns
        return await call()

    return await retrying(once)


@dataclass(frozen=True)
class Item:
    """One message of a reply: text (with its entities), a photo or a document; the
    buttons ride on it as an inline keyboard."""

    kind: str  # answer | photo | document
    text: str = ""
    entities: list[MessageEntity] = field(default_factory=list)
    markup: InlineKeyboardMarkup | None = None
    data: bytes | None = None
    filename: str | None = None


async def put(bot: Bot, chat_id: int, item: Item) -> int:
    """One message to Telegram, once; its message id. Refused formatting goes again as
    plain text, a refused photo as a document. The one way a message is sent: the outbox's
    replies and the deliveries a feature makes unasked (bot/telegram/delivery.py)."""
    markup = item.markup
    try:
        if item.kind == "answer":
            msg = await bot.send_message(chat_id, item.text, parse_mode=None,
                entities=item.entities or None, reply_markup=markup)  # fmt: skip
        else:
            # A file's name is shown too: "invoice\u202egpj.exe" must not read as a .jpg.
            file = BufferedInputFile(item.data or b"", filename=shown(item.filename or "file"))
            send = bot.send_photo if item.kind == "photo" else bot.send_document
            msg = await send(chat_id, file, reply_markup=markup)
    except TelegramBadRequest as exc:
        if item.kind == "answer" and item.entities:
            log.warning("Telegram rejected a formatted message (%s); sending it plain", exc)
            return await put(bot, chat_id, Item("answer", item.text, [], markup))
        if item.kind == "photo":
            log.info("%s not taken as a photo (%s); sending a document", item.filename, exc)
            return await put(bot, chat_id, Item("document", "", [], markup, item.data,
                                                item.filename))  # fmt: skip
        raise
    return msg.message_id


async def send_chunk(
    bot: Bot,
    chat_id: int,
    text: str,
    entities: list[MessageEntity],
    reply_markup: InlineKeyboardMarkup | None = None,
) -> int:
    """Send one chunk now (429 and network errors retried, bounded); refused formatting
    goes again as plain text (`put`)."""
    return await with_retry(
        lambda: put(bot, chat_id, Item("answer", text, entities, reply_markup)), "sendMessage"
    )


async def send_plain(bot: Bot, chat_id: int, text: str) -> list[int]:
    """Send text as is (no formatting), split if long."""
    ids = []
    for piece in split_plain(text) or ["(empty)"]:

        def send(p: str = piece) -> Awaitable[Message]:
            return bot.send_message(chat_id, p, parse_mode=None)

        msg = await with_retry(send)
        ids.append(msg.message_id)
    return ids


__all__ = [
    "Item", "put", "render", "send_chunk", "send_plain", "tail", "utf16_len",
]  # fmt: skip
