"""`sidekick run`: the Telegram bot, by long polling or (with WEBHOOK_URL) a webhook."""

from __future__ import annotations

import asyncio
import contextlib
import functools
import hashlib
import logging
import signal
from pathlib import Path
from urllib.parse import urlparse

from aiogram.exceptions import (
    TelegramAPIError,
    TelegramNetworkError,
    TelegramServerError,
    TelegramUnauthorizedError,
)
from aiogram.types import MenuButtonDefault, MenuButtonWebApp, WebAppInfo
from aiogram.webhook.aiohttp_server import SimpleRequestHandler
from aiohttp import web

from bot.access.gate import owner_code
from bot.app import build_app
from bot.config import Settings, require
from bot.errors import ConfigError, ProviderError
from bot.ops.backup import backup_jobs
from bot.ops.live import hand_operator
from bot.telegram.delivery import TelegramDelivery
from bot.telegram.dispatcher import Runtime, build_runtime
from bot.telegram.render import with_retry
from bot.telegram.resume import continue_cut_turns
from bot.telegram.webhook_guard import guards
from scheduler.dbfile import DatabaseFileWatch
from scheduler.setup import JobSpec, Scheduler, start_scheduler
from tools.feature import MENU, PAGES

log = logging.getLogger(__name__)

WEBHOOK_IDLE_S = 30.0  # a connection without a complete request is closed after this


def webhook_secret(settings: Settings) -> str:
    """The secret Telegram sends with each webhook call, derived from the bot token: stable
    across restarts, the same in every worker that shares the token (docs/scaling.md), and
    new whenever the token is revoked. Not a setting (WEBHOOK_SECRET was): nothing an
    operator could choose is better than a hash of a secret they already keep."""
    assert settings.telegram_bot_token is not None
    token = settings.telegram_bot_token.get_secret_value()
    return hashlib.sha256(b"sidekick-webhook:" + token.encode()).hexdigest()


def listen_address(value: str) -> tuple[str, int]:
    """WEBHOOK_LISTEN as (host, port); a bare port listens on loopback only (the reverse
    proxy is on the same host): all interfaces only when a host such as 0.0.0.0 is named."""
    host, _, port = value.rpartition(":")
    try:
        return host or "127.0.0.1", int(port)
    except ValueError:
        raise ConfigError(f"WEBHOOK_LISTEN: expected host:port, got {value!r}") from None


async def check_token(rt: Runtime, stop: asyncio.Event | None = None, attempts: int = 5) -> bool:
    """getMe: a bad token or an unreachable TELEGRAM_API_URL is one clear line, not a
    traceback. False when a stop signal came while waiting for Telegram."""
    url = rt.app.settings.telegram_api_url
    for attempt in range(1, attempts + 1):
        try:
            me = await rt.bot.get_me()
            log.info("connected to %s as @%s", url, me.username)
            return True
        except TelegramUnauthorizedError:
            raise ConfigError(
                "TELEGRAM_BOT_TOKEN: Telegram rejected the token (401); "
                "copy it again from @BotFather"
            ) from None
        except (TelegramNetworkError, TelegramServerError) as exc:
            if attempt == attempts:
                # Most often the network, not the setting: exit 1 so a supervisor retries.
                raise ProviderError(
                    f"cannot reach the Telegram Bot API at {url} ({type(exc).__name__}); "
                    "check the network (and TELEGRAM_API_URL if you changed it)"
                ) from None
            log.warning("Telegram at %s is not reachable yet; retry %d", url, attempt)
            stop = stop or asyncio.Event()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), 2 ** (attempt - 1))
            if stop.is_set():  # SIGTERM while waiting for Telegram: just stop
                return False
    return False


async def serve_webhook(rt: Runtime, stop: asyncio.Event) -> None:
    settings = rt.app.settings
    assert settings.webhook_url
    host, port = listen_address(settings.webhook_listen)
    secret = webhook_secret(settings)
    web_app = web.Application(middlewares=guards(secret))
    path = urlparse(settings.webhook_url).path or "/"
    SimpleRequestHandler(rt.dp, rt.bot, secret_token=secret).register(web_app, path=path)
    if (pages := rt.app.maybe(PAGES)) is not None:  # the dashboard, behind the same proxy
        web_app.add_routes(pages.routes())
    # A connection that sends no complete request within this time is closed (aiohttp's
    # idle timeout also runs before the first request): half-open and byte-dripping
    # clients cannot pile up.
    runner = web.AppRunner(web_app, access_log=None, keepalive_timeout=WEBHOOK_IDLE_S)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    try:
        await rt.dp.emit_startup(bot=rt.bot, **rt.dp.workflow_data)
        await rt.bot.set_webhook(
            settings.webhook_url,
            secret_token=secret,
            allowed_updates=rt.dp.resolve_used_update_types(),
        )
        log.info(
            "webhook mode: listening on %s:%d%s for %s", host, port, path, settings.webhook_url
        )
        await stop.wait()
    finally:
        await runner.cleanup()  # stop accepting updates; in-flight ones drain in shutdown


async def serve_polling(rt: Runtime, stop: asyncio.Event) -> None:
    log.info(
        "long polling mode: one worker only, Telegram allows one getUpdates consumer "
        "(set WEBHOOK_URL, and DATABASE_URL to PostgreSQL, for several workers)"
    )
    poll = asyncio.create_task(rt.poll())
    waiter = asyncio.create_task(stop.wait())
    await asyncio.wait({poll, waiter}, return_when=asyncio.FIRST_COMPLETED)
    waiter.cancel()
    if poll.done():
        poll.result()  # polling ended on its own: surface why


async def start(rt: Runtime) -> list[JobSpec]:
    """What `sidekick run` starts before it takes updates: the operator's commands handed to
    the features (the dashboard's owner pages), the features' parts and jobs, the daily
    backups, and the menu button (the dashboard's Mini App, where Telegram can open it)."""
    app = rt.app
    hand_operator(app)
    jobs = await app.start_features(TelegramDelivery(rt.outbox))
    jobs += backup_jobs(app.settings)  # the outbox has a courier of its own (rt.outbox)
    await set_menu_button(rt)
    return jobs


async def set_menu_button(rt: Runtime) -> None:
    """The chat's menu button opens the dashboard as a Mini App when it is served over
    https; otherwise it is Telegram's own again (a Mini App set by an earlier run would
    open nothing). A refusal leaves the bot running."""
    menu = rt.app.maybe(MENU)
    if menu is None:
        return
    opens = menu.menu()
    button: MenuButtonWebApp | MenuButtonDefault = (
        MenuButtonDefault()
        if opens is None
        else MenuButtonWebApp(text=opens.label, web_app=WebAppInfo(url=opens.url))
    )
    try:
        await with_retry(lambda: rt.bot.set_chat_menu_button(menu_button=button),
                         "setChatMenuButton")  # fmt: skip
    except TelegramAPIError as exc:
        log.warning("Telegram did not take the menu button (%s): /dashboard still works", exc)


async def run_bot(settings: Settings) -> None:
    require(settings, "telegram_bot_token", "llm_model")
    if not settings.allowed_user_ids:
        token = settings.telegram_bot_token
        assert token is not None  # required above
        log.warning(
            "ALLOWED_USER_IDS is empty: unless an owner was learned before, the first person "
            "to send the bot the owner code %s privately becomes its owner",
            owner_code(token.get_secret_value()),
        )
    app = await build_app(settings)
    rt: Runtime | None = None
    scheduler: Scheduler | None = None
    try:
        rt = build_runtime(app)  # inside: a Bot that cannot be built must not leave app open
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError):
                loop.add_signal_handler(sig, stop.set)
        if not await check_token(rt, stop):
            return
        # Before updates are taken: each chat's cut turn goes before its newer messages.
        await continue_cut_turns(rt, app.deps.clock())
        guard = functools.partial(rt.locks.try_hold, "job")  # one worker runs each due job
        jobs = await start(rt)
        db_file = app.engine.url.database
        if app.engine.dialect.name == "sqlite" and db_file not in (None, "", ":memory:"):
            jobs.append(DatabaseFileWatch(Path(db_file)).job_spec())
        scheduler = start_scheduler(jobs, guard)
        if settings.webhook_url:
            await serve_webhook(rt, stop)
        else:
            await serve_polling(rt, stop)
        log.info("stopping: finishing messages in progress")
    finally:
        if scheduler is not None:
            await scheduler.stop()
        if rt is not None:
            await rt.shutdown()
        else:
            await app.close()
        log.info("stopped")
