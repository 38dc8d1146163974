"""Update middlewares, in the order every update passes them (bot/telegram/dispatcher.py):
counted while in flight, kept in the inbox until handled, an album's parts as one message,
one chat's updates one at a time in arrival order, and who may talk to the bot. The inbox
and the chat's order are one mechanism: the inbox passes a chat's updates on in arrival
order for the chat's turn to take, and its replays at start-up hold that turn already.

The inbox: every update is kept, in one INSERT on arrival, until it is handled. Telegram
forgets an update once it was fetched (polling confirms the offset with the next
getUpdates) or answered (webhook), but a chat's updates are handled one at a time: those
that wait behind a long turn would be lost with the process. So each update is stored
before it waits for its chat's turn (the same INSERT claims its id, so an update sent again
is handled once) and marked done when handled. At the next start, the updates of the last
RESTART_WINDOW still not done are handled again, each chat's in order, after its cut turns
(bot/telegram/resume.py: `waiting`, `take_up`), through the dispatcher like a new update.

An update whose turn had begun (its message is stored) is not handled again: the turn is
continued instead. An update a replay did not get through (the process died again) is
dropped with a line in the log, as it may be the update that takes the process down. A
clean stop cancels the updates still waiting after the grace: not done, they are taken up
at the next start. Several workers (PostgreSQL): one claims each replay (compare-and-set on
`replays`), under the chat's advisory lock.

Telegram delivers an album (media group) as separate updates sharing a `media_group_id`.
AlbumMiddleware runs before the per-chat ordering: the first part goes on (taking its place
in the chat's order) with an `Album` in `data["album"]`; every later part is added to that
Album and stops there, so it never waits for the chat's turn the first part holds. The
handler calls `await album.collect()`, which returns once no new part has come for
`window` seconds. A message sent after the album is answered after it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from datetime import datetime, timedelta
from functools import partial
from typing import TYPE_CHECKING, Any

from aiogram import BaseMiddleware, Bot
from aiogram.enums import ChatType
from aiogram.exceptions import TelegramAPIError
from aiogram.types import Chat, Message, TelegramObject, Update, User
from sqlalchemy.exc import DBAPIError

from bot.access.feature import FEATURE as ACCESS_FEATURE
from bot.access.gate import ACCESS, AccessList, carries_code, owner_code
from bot.access.pairing import CODE_KEPT_OUT, Pairing, Stranger
from bot.telegram.approval_ask import WAITING, answers_a_question
from bot.telegram.groups import GROUP_CHATS, addressed
from bot.telegram.held import HELD, react
from bot.telegram.outbox import Outbox
from bot.telegram.replies import send_answer
from db.engine import UNAVAILABLE, SessionFactory
from db.repos import updates
from tools.base import Clock
from tools.feature import Answer

if TYPE_CHECKING:
    from bot.app import App

log = logging.getLogger(__name__)

Handler = Callable[[TelegramObject, dict[str, Any]], Awaitable[Any]]
# Set in the data of an update handled again at start-up (the inbox, below): the task
# that replays it is counted in flight and holds the chat's turn already.
REPLAYED = "inbox_replayed"

ALBUM_WINDOW_S = 0.8
MAX_ALBUM_WAIT_S = 5.0
MAX_PARTS = 10  # Telegram's own limit for an album


class InFlight(BaseMiddleware):
    """The update-handling tasks running now, so shutdown can wait for them.

    Registered outermost: a task registers itself in its first step, before anything in
    it can wait (an album held open, a chat's turn), so no update escapes the count.
    """

    def __init__(self) -> None:
        self.tasks: set[asyncio.Task[Any]] = set()
        self._idle = asyncio.Event()
        self._idle.set()

    def add(self, task: asyncio.Task[Any]) -> None:
        self.tasks.add(task)
        self._idle.clear()

    def discard(self, task: asyncio.Task[Any]) -> None:
        self.tasks.discard(task)
        if not self.tasks:
            self._idle.set()

    async def wait_idle(self) -> None:
        await self._idle.wait()

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        task = asyncio.current_task()
        if task is None or data.get(REPLAYED):
            return await handler(event, data)
        self.add(task)
        try:
            return await handler(event, data)
        finally:
            self.discard(task)


def chat_key(update: Update) -> int | None:
    """The chat an update belongs to; updates of one chat are handled in order."""
    if update.message is not None:
        return update.message.chat.id
    if update.edited_message is not None:
        return update.edited_message.chat.id
    if update.callback_query is not None:
        if answers_a_question(update.callback_query.data or ""):
            return None  # the chat's turn is waiting for this very press: no queue
        msg = update.callback_query.message
        return msg.chat.id if msg is not None else update.callback_query.from_user.id
    return None


# Old rows are deleted at the first update after a start, then hourly: Telegram stops
# retrying an update within a day, and after a week without updates it may start its ids
# anew, at random, so a row kept that long could take a new update for one sent again.
PRUNE_EVERY = timedelta(hours=1)
KEEP_CLAIMS = timedelta(days=2)


class InboxMiddleware(BaseMiddleware):
    """Stores each update on arrival (registered right after InFlight, before an album or
    the chat's turn makes it wait), skips one stored before, marks it done when handled."""

    def __init__(self, sf: SessionFactory, clock: Clock) -> None:
        self.sf = sf
        self.clock = clock
        self._pruned: datetime | None = None
        # Per chat, the updates this process stored and has not finished (several workers
        # order only the others' updates through the database: bot/telegram/workers.py).
        self.held: dict[int, set[int]] = {}
        # Per chat, the last update to pass on: storing takes an await, and updates of one
        # chat must still reach the chat's turn (ChatOrderMiddleware) in arrival order.
        self._last: dict[int, asyncio.Future[None]] = {}
        # The updates of one getUpdates answer take their first step in one pass of the
        # loop: their claims gather here and are written together on the next pass, one
        # transaction for the batch rather than one each.
        self._claims: list[tuple[dict[str, Any], asyncio.Future[bool]]] = []
        self._writes: set[asyncio.Task[None]] = set()

    def mine(self, chat: int) -> set[int]:
        return self.held.get(chat, set())

    async def keep(self, event: Update) -> bool:
        """Store the update; False when it was stored before (a webhook retry, another
        worker's, or fetched again by polling after a kill)."""
        now = self.clock()
        payload = event.model_dump_json(exclude_none=True)
        try:
            claimed = await self._claim(
                updates.claim_row(event.update_id, chat_key(event), now, payload)
            )
        except UNAVAILABLE as exc:
            # The database is busy past its wait (its lock, or every pooled connection in
            # use) or failing: the message is handled without its stored copy (the turn
            # waits out a busy database once, or names the problem), rather than dropped here.
            log.warning("update %d not stored (%s): handled without a copy", event.update_id,
                        type(_cause(exc)).__name__)  # fmt: skip
            return True
        if not claimed:
            log.info(
                "update %d was already taken (sent again, or another worker's)", event.update_id
            )
            return False
        if self._pruned is None or now - self._pruned >= PRUNE_EVERY:
            self._pruned = now
            await updates.prune(self.sf, now - KEEP_CLAIMS)
        return True

    async def _claim(self, row: dict[str, Any]) -> bool:
        claimed: asyncio.Future[bool] = asyncio.get_running_loop().create_future()
        self._claims.append((row, claimed))
        if len(self._claims) == 1:  # the pass's first: its write goes on the next pass
            write = asyncio.create_task(self._write_claims())
            self._writes.add(write)
            write.add_done_callback(self._writes.discard)
        return await claimed

    async def _write_claims(self) -> None:
        batch, self._claims = self._claims, []
        try:
            got = await updates.claim_all(self.sf, [row for row, _ in batch])
        except Exception as exc:  # each waiting update hears it (UNAVAILABLE: keep() says so)
            for _, claimed in batch:
                if not claimed.done():
                    claimed.set_exception(exc)
            return
        for (_, claimed), kept in zip(batch, got, strict=True):
            if not claimed.done():  # not cancelled meanwhile (a stop)
                claimed.set_result(kept)

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        if not isinstance(event, Update) or data.get(REPLAYED):
            return await handler(event, data)  # a replay's row is kept by take_up
        chat = chat_key(event)
        if not await self._in_order(chat, self.keep(event)):
            return None
        if chat is not None:
            self.held.setdefault(chat, set()).add(event.update_id)
        try:
            result = await handler(event, data)
        except asyncio.CancelledError:
            raise  # a clean stop cut it: not done, the next start takes it up
        except Exception:
            await self._finish(event.update_id)
            raise
        finally:
            if chat is not None:
                self._release(chat, event.update_id)
        await self._finish(event.update_id)
        return result

    async def _finish(self, update_id: int) -> None:
        """Mark it done. A database too busy for that leaves the row undone: a replay at the
        next start finds its message stored and skips it, so nothing is answered twice."""
        try:
            await updates.finish(self.sf, update_id)
        except UNAVAILABLE as exc:
            log.warning("update %d handled, but not marked done: %s", update_id, _cause(exc))

    async def _in_order(self, chat: int | None, storing: Awaitable[bool]) -> bool:
        """Store, then pass on only after the chat's earlier update passed on: the place in
        line is taken before the first await, and the handler is called right after (no
        await between), so the chat's turn sees its updates in arrival order."""
        if chat is None:
            return await storing
        before = self._last.get(chat)
        mine: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._last[chat] = mine
        try:
            kept = await storing
            if before is not None:
                await asyncio.wait({before})  # never cancels the earlier one's future
            return kept
        finally:
            mine.set_result(None)
            if self._last.get(chat) is mine:
                del self._last[chat]

    def _release(self, chat: int, update_id: int) -> None:
        held = self.held[chat]
        held.discard(update_id)
        if not held:
            del self.held[chat]


def _cause(exc: Exception) -> BaseException:
    """What to log of a database failure: the driver's error, not SQLAlchemy's text (which
    repeats the statement's parameters, the user's message among them)."""
    return exc.orig if isinstance(exc, DBAPIError) and exc.orig is not None else exc


class AccessMiddleware(BaseMiddleware):
    """Only ALLOWED_USER_IDS and who the owner let in (bot/access) get served, and everyone in
    a group the owner admitted. Anyone else is bot/access's to answer (pairing.py): a
    stranger's message asks the owner (Allow / Deny), and with no owner at all the first
    private message that carries the owner code makes its sender the owner; this sends what
    it decides."""

    def __init__(self, app: App) -> None:
        self.access: AccessList = app.part(ACCESS)
        token = app.settings.telegram_bot_token
        self.code = owner_code(token.get_secret_value()) if token is not None else None
        self.pairing = Pairing(
            self.access, app.session_factory, app.deps.clock, self.code, app.settings.env_source
        )

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        user: User | None = data.get("event_from_user")
        if await self._kept_out(event, data):
            return None
        if user is not None and await self.access.allows_user(user.id):
            return await handler(event, data)
        if user is None or not isinstance(event, Update):
            return None
        chat: Chat | None = data.get("event_chat")
        if (
            chat is not None
            and chat.type in GROUP_CHATS
            and await self.access.allows_group(chat.id)
        ):
            return await handler(event, data)
        bot: Bot = data["bot"]
        if event.callback_query is not None:
            log.warning("refused a button press from user id %s (not let in)", user.id)
            await bot.answer_callback_query(event.callback_query.id, "Not allowed.")
            return None
        message = event.message
        if message is None:
            return None
        if message.chat.type == ChatType.PRIVATE and await self.access.owner() is None:
            said = await self.pairing.claim(user.id, user.full_name, message.text or "")
            if said is not None:  # the owner now: told so; the code stays access's
                await bot.send_message(user.id, said)
                return None
            said = self.pairing.unowned(user.id)
            if said is not None:
                await bot.send_message(user.id, said)
            return None
        # In a group, only a stranger who talks to the bot hears why it stays silent.
        if not await addressed(message, bot, "mention"):
            return None
        log.warning("refused an update from user id %s (not let in)", user.id)
        group = message.chat.type in GROUP_CHATS
        who = Stranger(
            user.id,
            user.full_name,
            message.chat.id if group else user.id,
            (message.chat.title or "") if group else None,
        )
        said = await self.pairing.knock(who, partial(_ask_owner, data["outbox"]))
        if said is not None:
            await bot.send_message(message.chat.id, said)

    async def _kept_out(self, event: TelegramObject, data: dict[str, Any]) -> bool:
        """A message that carries the owner code from someone let in (the owner sending it
        again, in a private chat or a group): said so, and never handed on. While there is
        no owner, the claim below takes it."""
        message = event.message if isinstance(event, Update) else None
        if message is None or not carries_code(self.code, message.text or message.caption or ""):
            return False
        if await self.access.owner() is None:
            return False
        await data["bot"].send_message(message.chat.id, CODE_KEPT_OUT)
        return True


async def _ask_owner(outbox: Outbox, owner: int, request: Answer) -> bool:
    """The owner gets a stranger's request with its buttons, as a command's answer would."""
    try:
        await send_answer(outbox, owner, ACCESS_FEATURE, request, forbidden_raises=True)
    except TelegramAPIError as exc:  # the owner never opened a chat with the bot
        log.warning("could not ask the owner (id %s) about a stranger: %s", owner, exc)
        return False
    return True


class Album:
    def __init__(self, first: Message, window: float, on_close: Callable[[], None]) -> None:
        self.parts = [first]
        self.window = window
        self.closed = False
        self._on_close = on_close
        self._arrived = asyncio.Event()

    def add(self, message: Message) -> None:
        if len(self.parts) < MAX_PARTS:
            self.parts.append(message)
        self._arrived.set()

    async def collect(self) -> list[Message]:
        """Every part, in order, once the album has been quiet for `window` seconds."""
        if not self.closed:
            loop = asyncio.get_running_loop()
            deadline = loop.time() + MAX_ALBUM_WAIT_S
            while (left := min(self.window, deadline - loop.time())) > 0:
                self._arrived.clear()
                try:
                    await asyncio.wait_for(self._arrived.wait(), left)
                except TimeoutError:
                    break
            self.closed = True
            self._on_close()
        return sorted(self.parts, key=lambda m: m.message_id)


class AlbumMiddleware:
    """Not a coroutine itself: an update that is no album part is the handler's own
    awaitable, so this middleware takes no step in the rest of its handling."""

    def __init__(self, window: float = ALBUM_WINDOW_S) -> None:
        self.window = window
        self.groups: dict[tuple[int, str], Album] = {}

    def __call__(
        self, handler: Handler, event: TelegramObject, data: dict[str, Any]
    ) -> Awaitable[Any]:
        msg = event.message if isinstance(event, Update) else None
        if msg is None or not msg.media_group_id:
            return handler(event, data)
        return self._part(handler, event, data, msg, msg.media_group_id)

    async def _part(
        self,
        handler: Handler,
        event: TelegramObject,
        data: dict[str, Any],
        msg: Message,
        group: str,
    ) -> Any:
        key = (msg.chat.id, group)
        album = self.groups.get(key)
        if album is not None and not album.closed:
            album.add(msg)
            return None
        new = Album(msg, self.window, lambda: self._forget(key, new))
        self.groups[key] = data["album"] = new
        try:
            return await handler(event, data)
        finally:
            self._forget(key, new)

    def _forget(self, key: tuple[int, str], album: Album) -> None:
        if self.groups.get(key) is album:
            del self.groups[key]


WAITS_FOR_QUESTION = (
    "⏳ The approval question above is waiting for an answer (no answer in time counts as "
    "no). I'll answer this message right after it; commands are answered meanwhile."
)
UNORDERED = "unordered"  # set in the handler data of a command answered out of turn


def is_command(update: Update) -> bool:
    message = update.message
    return message is not None and (message.text or "").startswith("/")


async def _for_the_bot(update: Update, data: dict[str, Any]) -> bool:
    """A message from someone served, addressed to the bot (in a group, people talking
    among themselves hear nothing)."""
    message, app = update.message, data["app"]
    if message is None or message.from_user is None:
        return False
    if not await app.part(ACCESS).allows_user(message.from_user.id):
        return False
    return await addressed(message, data["bot"], app.settings.group_replies)


class ChatOrderMiddleware(BaseMiddleware):
    """Handle the updates of one chat one at a time, in arrival order; chats run concurrently.

    aiogram runs every update in its own task (handle_as_tasks); asyncio.Lock wakes waiters
    first-in first-out, and the tasks reach the lock in the order polling created them.

    A message that comes while the chat's turn waits for the model (an outage) gets a
    reaction: it is held too (bot/telegram/held.py).

    Except while the chat's turn waits for the user's answer to an approval question (up to
    its timeout, minutes): then a command is answered at once, and the first message that
    comes meanwhile hears at once that it waits for the question, then keeps its place.
    A plain message does not settle the question: a button does (text could be anything,
    and the message is answered right after).
    """

    def __init__(self) -> None:
        self.locks: dict[int, asyncio.Lock] = {}
        self.users: dict[int, int] = {}

    async def enter(self, key: int) -> None:
        """Wait for the chat's turn (work outside an update takes one too: a turn a restart
        cut, continued before the chat's newer messages)."""
        lock = self.locks.get(key)
        if lock is None:
            lock = self.locks[key] = asyncio.Lock()
        self.users[key] = self.users.get(key, 0) + 1
        try:
            await lock.acquire()
        except BaseException:
            self._forget(key)
            raise

    def leave(self, key: int) -> None:
        self.locks[key].release()
        self._forget(key)

    def _forget(self, key: int) -> None:
        # Forget idle chats so the dict does not grow with every chat ever seen.
        self.users[key] -= 1
        if not self.users[key]:
            del self.users[key], self.locks[key]

    async def __call__(self, handler: Handler, event: TelegramObject, data: dict[str, Any]) -> Any:
        key = chat_key(event) if isinstance(event, Update) else None
        if key is None or data.get(REPLAYED):
            return await handler(event, data)
        lock = self.locks.get(key)
        if lock is not None and lock.locked() and isinstance(event, Update) and WAITING.waits(key):
            if is_command(event):
                data[UNORDERED] = True
                return await handler(event, data)
            if await _for_the_bot(event, data) and WAITING.tell_once(key):
                await data["outbox"].say(key, WAITS_FOR_QUESTION)
        elif lock is not None and lock.locked() and isinstance(event, Update) and key in HELD:
            if event.message is not None and not data["outbox"].held():
                if await _for_the_bot(event, data):
                    await react(data["bot"], key, event.message.message_id)
        await self.enter(key)
        try:
            return await handler(event, data)
        finally:
            self.leave(key)
