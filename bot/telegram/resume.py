"""Turns a restart cut are continued, not apologised for.

At start-up, before updates are taken, each Telegram user message of the last
RESTART_WINDOW without a final answer (the bot was killed or stopped mid-turn, also right
after a tool round) is taken up again: the agent rebuilds the turn from what it recorded
(the message, each tool round with its results; a recorded tool call is never run again)
and asks the model from there (Agent.resume). The user sees one line that it continues,
then the answer. Each chat's cut turns go before its newer messages.

A turn cut twice (its first run and its continuation) is not tried a third time: it may
be the turn itself that takes the process down (memory, a native crash, a tool that
hangs the machine). The user is told in one line, the log says why.

Several workers (PostgreSQL): a chat's cut turns are looked at under the chat's advisory
lock, which a live worker holds while it handles one of that chat's updates, so a turn in
progress is never taken for a cut one; and the claim (turn_resumes: an INSERT on the
message's id, then a compare-and-set on `attempts`) lets exactly one worker continue each.
"""

from __future__ import annotations

import asyncio
import logging
import textwrap
from datetime import datetime, timedelta

from aiogram.types import Update

from bot.agent.runner import Events
from bot.errors import SidekickError, public_text
from bot.telegram.answer import ReplyStreamer, deliver
from bot.telegram.dispatcher import Runtime
from bot.telegram.held import HELD
from bot.telegram.middlewares import REPLAYED
from bot.telegram.outbox import text_items
from bot.telegram.render import send_plain, split_plain
from db.repos import outbox as outbox_repo
from db.repos import resume as repo
from db.repos import updates
from db.repos.resume import Cut
from db.repos.updates import Waiting

log = logging.getLogger(__name__)

RESTART_WINDOW = timedelta(hours=6)  # older cut turns are not taken up again
# The first run and one continuation: a turn cut at both is not run a third time.
MAX_CONTINUATIONS = 1
# A give-up notice is sent at once; the outbox sends it only if that never happened
# (the process stopped in between, or Telegram is down).
NOTICE_GRACE = timedelta(minutes=2)
QUOTE_CHARS = 80
MAX_REPLAYS = 1  # an update that took the process down on its replay too is dropped


def quote(text: str) -> str:
    short = " ".join(text.split())
    return short if len(short) <= QUOTE_CHARS else short[: QUOTE_CHARS - 1] + "…"


def continuing_line(text: str) -> str:
    return f"I was restarted while answering “{quote(text)}”; continuing."


def given_up_line(text: str) -> str:
    return (
        f"I was restarted twice while answering “{quote(text)}”, so I stopped trying. "
        "Send it again if you still need an answer."
    )


async def continue_cut_turns(rt: Runtime, started: datetime) -> int:
    """Take up every turn a restart cut (messages from before `started`, within the
    window), then the updates that were waiting for their chat's turn (the inbox:
    bot/telegram/middlewares.py), each chat's in order and before that chat's newer
    updates; how many turns were found.
    The work goes on in tasks that shutdown waits for like updates in progress."""
    since = started - RESTART_WINDOW
    async with rt.app.session_factory() as s:
        found = await repo.cut_turns(s, since, started)
    chats: dict[int, list[Cut]] = {}
    for cut in found:
        chats.setdefault(cut.chat_id, []).append(cut)
    left = await waiting(rt, since, started)
    for chat in {**chats, **left}:
        # Taken here, before updates are: the chat's next message waits for these.
        await rt.chat_order.enter(chat)
        work = _chat(rt, chat, chats.get(chat, []), left.get(chat, []), since)
        task = asyncio.create_task(work, name=f"continue-chat-{chat}")
        rt.inflight.add(task)
        task.add_done_callback(rt.inflight.discard)
    if found:
        log.warning("%d message(s) were left without an answer by a stop: continuing", len(found))
    return len(found)


async def _chat(
    rt: Runtime, chat: int, cuts: list[Cut], rows: list[Waiting], since: datetime
) -> None:
    try:
        # PostgreSQL: a live worker handling this chat's update finishes it first.
        async with rt.locks.hold("chat", chat):
            for cut in cuts:
                try:
                    await _take_up(rt, cut)
                except Exception:  # the chat's next cut turn, and its new messages, go on
                    log.exception("message %d: its cut turn could not be taken up", cut.message_id)
            for row in rows:  # after the cut turns: they came first
                try:
                    await take_up(rt, row, since)
                except Exception:
                    log.exception("update %d could not be taken up", row.update_id)
    finally:
        rt.chat_order.leave(chat)


async def _take_up(rt: Runtime, cut: Cut) -> None:
    sf, clock = rt.app.session_factory, rt.app.deps.clock
    async with sf() as s, s.begin():
        tries = await repo.tries(s, cut.message_id)  # again, now that the chat is ours
        if tries is None:
            return  # answered or given up meanwhile (another worker)
        if tries < MAX_CONTINUATIONS and not await repo.claim(s, cut.message_id, tries, clock()):
            return  # another worker continues it
    if tries >= MAX_CONTINUATIONS:
        await _give_up(rt, cut, tries)
        return
    log.info("message %d (chat %d): continuing the turn a stop cut", cut.message_id, cut.chat_id)
    try:
        try:
            await rt.outbox.send(cut.chat_id, None, text_items([continuing_line(cut.text)]))
        except Exception as exc:  # the answer matters more than the line: go on
            log.warning("chat %d: the continuing line was not sent (%s)", cut.chat_id, exc)
        await _answer(rt, cut)
    except asyncio.CancelledError:
        # A clean shutdown cut it (not a crash): the next start continues it again.
        async with sf() as s, s.begin():
            await repo.release(s, cut.message_id)
        raise


async def _answer(rt: Runtime, cut: Cut) -> None:
    bot, app, outbox = rt.bot, rt.app, rt.outbox
    draft_interval: float = rt.dp["draft_interval"]
    streamer = ReplyStreamer(
        bot, cut.chat_id, drafts=True, interval=draft_interval, held=outbox.held
    )
    told = False

    async def on_wait(line: str) -> None:  # the model's outage, waited out as for an update
        nonlocal told
        HELD.add(cut.chat_id)
        if not told:
            told = True
            await outbox.send(cut.chat_id, None, text_items([line]))

    try:
        events = Events(streamer.on_text, streamer.on_tools, on_wait)
        reply = await app.agent.resume(cut.message_id, cut.chat_id, events)
    except Exception as exc:
        # As for an update: a short line for the user (and no further try), the log the rest.
        if isinstance(exc, SidekickError):
            log.warning("message %d: continuing failed: %s", cut.message_id, exc)
        else:
            log.error("message %d: continuing failed", cut.message_id, exc_info=exc)
        await outbox.settled(cut.chat_id, cut.telegram_message_id)
        await outbox.send(cut.chat_id, None, text_items(split_plain(public_text(exc))))
        return
    finally:
        HELD.discard(cut.chat_id)
        await streamer.close()
    if reply is None:
        return
    await deliver(outbox, cut.chat_id, cut.telegram_message_id, reply)


async def _give_up(rt: Runtime, cut: Cut, tries: int) -> None:
    sf, clock = rt.app.session_factory, rt.app.deps.clock
    now = clock()
    async with sf() as s, s.begin():
        row = await repo.give_up(s, cut, now, given_up_line(cut.text), now + NOTICE_GRACE)
    if row is None:
        return  # another worker did
    log.error(
        "message %d (chat %d): the bot stopped %d times while answering it (its first run "
        "and %d continuation(s): killed, out of memory, or a crash; see the log before each "
        "start); not tried again, the user is told",
        cut.message_id, cut.chat_id, tries + 1, tries,
    )  # fmt: skip
    try:
        ids = await send_plain(rt.bot, cut.chat_id, given_up_line(cut.text))
    except Exception as exc:
        log.warning("chat %d: the notice waits in the outbox (%s)", cut.chat_id, exc)
        async with sf() as s, s.begin():
            await outbox_repo.settle(s, row, deliver_after=clock())
        return
    async with sf() as s, s.begin():
        await outbox_repo.settle(s, row, sent_at=clock(), message_id=ids[0], attempts=1)


# The updates a stop left waiting (the inbox keeps them: bot/telegram/middlewares.py).


def dropped_line(text: str) -> str:
    short = textwrap.shorten(text, QUOTE_CHARS, placeholder="…")
    what = f"your message “{short}”" if short else "your last message"
    return f"I was restarted twice before I could read {what}. Send it again if you still need it."


async def waiting(rt: Runtime, since: datetime, before: datetime) -> dict[int, list[Waiting]]:
    """The updates a stop left unhandled, by chat, oldest first. One without a chat (a press
    on a question that was waiting) has nothing left to answer: it is marked done."""
    sf = rt.app.session_factory
    async with sf() as s:
        found = await updates.waiting(s, since, before)
    chats: dict[int, list[Waiting]] = {}
    for row in found:
        if row.chat_id is None:
            await updates.finish(sf, row.update_id)
        else:
            chats.setdefault(row.chat_id, []).append(row)
    if found:
        log.warning("%d update(s) were left waiting by a stop: handling them", len(found))
    return chats


async def take_up(rt: Runtime, row: Waiting, since: datetime) -> None:
    """Handle a waiting update through the dispatcher, the chat's turn held by the caller."""
    sf, bot = rt.app.session_factory, rt.bot
    update = Update.model_validate_json(row.payload, context={"bot": bot})
    msg = update.message
    async with sf() as s, s.begin():
        if msg is not None and msg.from_user is not None:
            if await updates.recorded(s, msg.from_user.id, msg.message_id, since):
                await updates.drop(s, row.update_id)  # its turn began: continued as a turn
                return
        given_up = row.replays >= MAX_REPLAYS
        if given_up:
            # Exactly one worker marks it (the same compare-and-set), then tells.
            given_up = await updates.claim_replay(s, row.update_id, row.replays)
            await updates.drop(s, row.update_id)
        elif not await updates.claim_replay(s, row.update_id, row.replays):
            return  # another worker handles it
    if given_up:
        log.error(
            "update %d (chat %s): the bot stopped while handling it again after a stop; "
            "dropped (see the log before this start)",
            row.update_id, row.chat_id,
        )  # fmt: skip
        if msg is not None and row.chat_id is not None:
            text = msg.text or msg.caption or ""
            try:
                await rt.outbox.say(row.chat_id, dropped_line(text))
            except Exception as exc:
                log.warning(
                    "chat %d: could not tell that an update was dropped (%s)", row.chat_id, exc
                )
        return
    log.info("update %d (chat %s): handling it after a stop", row.update_id, row.chat_id)
    try:
        await rt.dp.feed_update(bot, update, **{REPLAYED: True})
    except asyncio.CancelledError:
        async with sf() as s, s.begin():
            await updates.release_replay(s, row.update_id)
        raise
    except Exception:
        log.exception("update %d: handling it after a stop failed", row.update_id)
    await updates.finish(sf, row.update_id)
