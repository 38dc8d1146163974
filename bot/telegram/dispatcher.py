"""Assembling the real Bot and Dispatcher from an App (run_bot, the tests and the bench)."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
from dataclasses import dataclass
from typing import Any

from aiogram import Bot, Dispatcher
from aiogram import methods as m
from aiogram.client.telegram import TelegramAPIServer
from aiogram.methods.base import Response
from aiogram.types import BotCommand

from bot.app import App
from bot.approvals.gate import APPROVALS
from bot.config import Settings
from bot.telegram.approval_ask import TelegramAsker
from bot.telegram.errors import on_error
from bot.telegram.middlewares import (
    ALBUM_WINDOW_S,
    AccessMiddleware,
    AlbumMiddleware,
    ChatOrderMiddleware,
    InboxMiddleware,
    InFlight,
)
from bot.telegram.outbox import Outbox
from bot.telegram.render import with_retry
from bot.telegram.routers import bot_commands, build_routers
from bot.telegram.session import SkippingSession
from bot.telegram.workers import WorkerOrderMiddleware
from bot.voice.replies import VOICE
from db.locks import Locks

log = logging.getLogger(__name__)

DRAFT_INTERVAL_S = 0.7  # at most ~1.4 drafts per second per chat
SHUTDOWN_GRACE_S = 10.0


@functools.cache
def _pin_response_models() -> tuple[Any, ...]:
    """Keep aiogram's `Response[T]` models alive.

    aiogram builds `Response[method.__returning__]` for every API reply; pydantic caches
    parametrized generics only weakly, so without a strong reference the model is rebuilt
    over and over (bench/overhead.py shows the cost). Pinning the ones we use keeps it
    built.
    """
    used = (
        m.SendMessage, m.SendMessageDraft, m.SendChatAction, m.SendDocument, m.EditMessageText,
        m.EditMessageReplyMarkup, m.DeleteMessage, m.AnswerCallbackQuery, m.GetUpdates, m.GetMe,
        m.SetMyCommands, m.DeleteWebhook, m.SetWebhook, m.GetFile, m.SendPhoto,
        m.SetMessageReaction, m.SetChatMenuButton,
    )  # fmt: skip
    return tuple(Response[method.__returning__] for method in used)  # type: ignore[name-defined]


def build_bot(settings: Settings) -> Bot:
    """A Bot on TELEGRAM_API_URL; no default parse_mode (we always send entities)."""
    assert settings.telegram_bot_token is not None
    _pin_response_models()
    session = SkippingSession(api=TelegramAPIServer.from_base(settings.telegram_api_url))
    return Bot(settings.telegram_bot_token.get_secret_value(), session=session)


async def _on_startup(bot: Bot, commands: list[BotCommand], outbox: Outbox) -> None:
    outbox.start()  # what an earlier run left queued goes first
    await with_retry(lambda: bot.set_my_commands(commands), "setMyCommands")


def build_dispatcher(
    app: App,
    *,
    draft_interval: float = DRAFT_INTERVAL_S,
    inflight: InFlight | None = None,
    album_window: float = ALBUM_WINDOW_S,
) -> Dispatcher:
    """The Dispatcher with every router; handlers may take `app: App` as an argument."""
    # No FSM: no handler keeps conversation state in aiogram, and its middleware would
    # look up a storage key and state for every update.
    dp = Dispatcher(disable_fsm=True)
    inflight = inflight or InFlight()
    # Chat ordering goes outermost, so the error reply of one message is sent before the next
    # message of that chat is handled, and shutdown waits for error replies too.
    outer = dp.update.outer_middleware
    existing = list(outer)
    for mw in existing:
        outer.unregister(mw)
    outer.register(inflight)  # first: counts every update task, even one an album holds
    # Stored before anything makes it wait, so a kill loses no update (bot/telegram/middlewares.py).
    inbox = InboxMiddleware(app.session_factory, app.deps.clock)
    outer.register(inbox)
    outer.register(AlbumMiddleware(album_window))  # before ordering (see middlewares.py)
    order = ChatOrderMiddleware()
    outer.register(order)
    locks = Locks.for_database(app.engine)
    if locks.shared:  # PostgreSQL: several workers may serve the bot (bot/telegram/workers.py)
        outer.register(WorkerOrderMiddleware(locks, inbox))
    for mw in existing:  # aiogram's error handling and user context
        outer.register(mw)
    outer.register(AccessMiddleware(app))
    routers = build_routers(app.features)
    dp.include_routers(*routers)
    dp.errors.register(on_error)
    dp.startup.register(_on_startup)
    dp["app"] = app
    dp["draft_interval"] = draft_interval
    # Resolved once: None where the voice feature is not listed or speech is off on this bot
    # (TTS_MODEL=off, SPEECH_BASE_URL=off), so then no answer asks about voice replies.
    voice = app.part(VOICE) if app.has(VOICE) else None
    dp["voice"] = voice if voice is not None and voice.synthesizer is not None else None
    dp["commands"] = bot_commands(app.features)
    dp["inflight"] = inflight
    dp["locks"] = locks
    dp["chat_order"] = order
    return dp


@dataclass
class Runtime:
    """A running bot: what polling, webhook mode and tests start and stop the same way."""

    app: App
    bot: Bot
    dp: Dispatcher
    inflight: InFlight
    asker: TelegramAsker | None = None  # approval questions, closed at shutdown
    polling: bool = False
    stopping: bool = False

    async def poll(self, polling_timeout: int = 30) -> None:
        self.polling = True
        try:
            await self.bot.delete_webhook(drop_pending_updates=False)
            if self.stopping:  # shut down while the webhook was being removed
                return
            await self.dp.start_polling(
                self.bot,
                polling_timeout=polling_timeout,
                handle_signals=False,  # run_bot owns the signals
                close_bot_session=False,  # shutdown closes it after in-flight work ends
            )
        finally:
            self.polling = False

    async def drain(self, grace: float) -> int:
        """Let in-flight updates finish for `grace` seconds, then cancel the rest."""
        # A task the last poll created takes its first step (where InFlight counts it) on
        # the loop's next pass: let it.
        await asyncio.sleep(0)
        tasks = {t for t in self.inflight.tasks if t is not asyncio.current_task()}
        if not tasks:
            return 0
        log.info("waiting up to %.0f s for %d message(s) in progress", grace, len(tasks))
        _, pending = await asyncio.wait(tasks, timeout=grace)
        for task in pending:
            task.cancel()
        if pending:
            await asyncio.gather(*pending, return_exceptions=True)
            log.warning("cancelled %d message(s) still in progress at shutdown", len(pending))
        return len(pending)

    async def shutdown(self, grace: float = SHUTDOWN_GRACE_S) -> None:
        """Stop taking updates, drain, close the bot session and the App."""
        self.stopping = True
        if self.polling:
            # "Polling is not started": poll() is still removing the webhook and will
            # return on its own, as `stopping` is set.
            with contextlib.suppress(RuntimeError):
                await self.dp.stop_polling()
        if self.asker is not None:  # a press may never come: the turn is continued at start
            self.asker.stop()
        try:
            await self.drain(grace)
        finally:
            await self.outbox.stop()
            await self.bot.session.close()
            await self.locks.close()
            await self.app.close()

    @property
    def outbox(self) -> Outbox:
        """Every reply to a chat goes through it (bot/telegram/outbox.py)."""
        outbox: Outbox = self.dp["outbox"]
        return outbox

    @property
    def locks(self) -> Locks:
        """Advisory locks shared with other workers (no-ops on SQLite)."""
        locks: Locks = self.dp["locks"]
        return locks

    @property
    def chat_order(self) -> ChatOrderMiddleware:
        """One chat's updates one at a time, in this process."""
        order: ChatOrderMiddleware = self.dp["chat_order"]
        return order


def build_runtime(
    app: App,
    *,
    draft_interval: float = DRAFT_INTERVAL_S,
    album_window: float = ALBUM_WINDOW_S,
) -> Runtime:
    inflight = InFlight()
    dp = build_dispatcher(
        app, draft_interval=draft_interval, inflight=inflight, album_window=album_window
    )
    app.warm_up()  # heavy models load in the background; polling does not wait for them
    bot = build_bot(app.settings)
    locks: Locks = dp["locks"]
    outbox = Outbox(bot, app.session_factory, app.deps.clock, locks if locks.shared else None)
    dp["outbox"] = outbox
    asker = None
    if app.has(APPROVALS):
        asker = app.part(APPROVALS).asker = TelegramAsker(bot, app.session_factory, outbox)
    return Runtime(app, bot, dp, inflight, asker)
