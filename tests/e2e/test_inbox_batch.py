"""Updates that come in one getUpdates answer are kept by the inbox in one write
(bot/telegram/middlewares.py InboxMiddleware, db/repos/updates.py claim_all): each is
stored before it is handled and marked done after, each chat's are answered in order, and
one among them that was taken before (sent again, or another worker's) is skipped while
the others are answered."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime

from sqlalchemy import select

from bot.agent.prompt import without_context
from bot.app import App
from db.models.inbox import TelegramUpdate
from db.repos import updates
from tests.e2e.conftest import ALLOWED, OWNER, TG
from tests.fakes.openai_server import Text

OTHER = ALLOWED[1]  # another allowed person: another chat


async def _batch(tg: TG, texts: list[str]) -> list[int]:
    """The texts sent while the bot is down: its first poll after the start takes them all
    in one answer."""
    await tg.stop()
    return [await tg.send(OWNER, text) for text in texts]


def _asked(tg: TG) -> list[str]:
    return [
        without_context([m for m in r["messages"] if m["role"] == "user"][-1]["content"])
        for r in tg.llm.requests
    ]


async def _rows(tg: TG, ids: list[int]) -> dict[int, bool]:
    async with tg.app.session_factory() as s:
        found = await s.execute(
            select(TelegramUpdate.update_id, TelegramUpdate.done).where(
                TelegramUpdate.update_id.in_(ids)
            )
        )
        return {int(uid): bool(done) for uid, done in found.all()}


async def test_updates_that_come_together_are_kept_handled_in_order_and_marked_done(
    tg: TG,
) -> None:
    ids = await _batch(tg, ["one", "two", "three"])
    tg.llm.add(Text("1"), Text("2"), Text("3"))
    await tg.start()
    assert [r.text for r in await tg.replies(OWNER, 3)] == ["1", "2", "3"]
    await tg.idle()
    assert _asked(tg) == ["one", "two", "three"]
    assert await _rows(tg, ids) == dict.fromkeys(ids, True)


async def test_one_taken_before_is_skipped_and_the_others_are_answered(tg: TG) -> None:
    # The taken one is another chat's: on PostgreSQL a chat's later updates rightly wait
    # while another worker holds an earlier one of the same chat (db/repos/updates.py).
    await tg.stop()
    ids = [
        await tg.send(OWNER, "first"),
        await tg.send(OTHER, "again"),
        await tg.send(OWNER, "last"),
    ]
    taken = ids[1]

    async def claimed_elsewhere(app: App) -> None:  # by another worker, say
        assert await updates.claim(app.session_factory, taken, OTHER, datetime.now(UTC))

    tg.on_build.append(claimed_elsewhere)
    tg.llm.add(Text("A"), Text("B"))
    await tg.start()
    assert [r.text for r in await tg.replies(OWNER, 2)] == ["A", "B"]
    await tg.idle()
    assert _asked(tg) == ["first", "last"]
    assert len(tg.llm.requests) == 2
    rows = await _rows(tg, ids)
    assert rows[ids[0]] and rows[ids[2]]  # handled: done
    assert rows[taken] is False  # the other worker's, left to it
    assert tg.server.sent_to(OTHER) == []


async def test_two_workers_holding_the_same_updates_in_opposite_orders_claim_each_once(
    tg: TG,
) -> None:
    """Two workers may hold one batch of updates in any order (Telegram's retry landed on
    the other): each update is claimed by exactly one of them, and neither write fails (on
    PostgreSQL, two multi-row INSERTs taking the same keys in opposite orders deadlock)."""
    now = datetime.now(UTC)
    rows = [updates.claim_row(900_000 + i, OWNER, now, None) for i in range(3000)]
    # Both workers' connections open first, so their writes run at the same time.
    await asyncio.gather(*(updates.claim_all(tg.app.session_factory, [r]) for r in rows[:2]))
    rows = rows[2:]
    first, second = await asyncio.gather(
        updates.claim_all(tg.app.session_factory, rows),
        updates.claim_all(tg.app.session_factory, rows[::-1]),
    )
    assert [a + b for a, b in zip(first, second[::-1], strict=True)] == [1] * len(rows)
