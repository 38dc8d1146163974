"""The inbox of Telegram updates: claiming update ids, so an update sent again (a webhook
retry, a second worker, polling after a kill) is handled once; keeping each update until it
is handled, so one a stop left waiting is taken up at the next start; and telling whether a
chat has an earlier update still in hand."""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import bindparam, delete, exists, insert, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import SessionFactory, engine_of, in_transaction
from db.models.core import Message, User
from db.models.inbox import TelegramUpdate


@dataclass(frozen=True)
class Waiting:
    """An update a stop left unhandled."""

    update_id: int
    chat_id: int | None
    payload: str
    replays: int


CLAIM = insert(TelegramUpdate)  # built once, as FINISH: every update runs it


def claim_row(
    update_id: int, chat_id: int | None, now: datetime, payload: str | None = None
) -> dict[str, Any]:
    """What `claim_all` keeps of an update (`payload`: its JSON)."""
    return {"update_id": update_id, "chat_id": chat_id, "received_at": now, "payload": payload}


async def claim(
    sf: SessionFactory,
    update_id: int,
    chat_id: int | None,
    now: datetime,
    payload: str | None = None,
) -> bool:
    """`claim_all` for one update."""
    (claimed,) = await claim_all(sf, [claim_row(update_id, chat_id, now, payload)])
    return claimed


async def claim_all(sf: SessionFactory, rows: Sequence[dict[str, Any]]) -> list[bool]:
    """Keep updates until `finish`: for each, True for the first caller with its update id,
    False for every later one. The primary key decides, so it holds across worker
    processes and restarts. Updates that came together go in one transaction (one INSERT of
    them all) unless one of them was taken before; then each goes in its own, which tells
    which."""
    if len(rows) > 1:
        try:
            # In update-id order: two workers' batches of the same updates (a retry that
            # landed on the other) then take the keys in one order, so on PostgreSQL the
            # later waits for the earlier and is refused, where opposite orders deadlock.
            batch = sorted(rows, key=lambda r: int(r["update_id"]))
            await in_transaction(engine_of(sf), lambda c: c.execute(CLAIM, batch))
            return [True] * len(rows)
        except IntegrityError:
            pass
    return [await _claim(sf, row) for row in rows]


async def _claim(sf: SessionFactory, row: dict[str, Any]) -> bool:
    try:
        # A Core connection, not an ORM session: this and `finish` run for every update,
        # and the session's set-up and tear-down cost more than the statement.
        await in_transaction(engine_of(sf), lambda c: c.execute(CLAIM, row))
        return True
    except IntegrityError:
        return False


async def earlier_pending(
    sf: SessionFactory,
    chat_id: int,
    update_id: int,
    since: datetime,
    mine: Collection[int] = (),
) -> bool:
    """Whether an earlier update of this chat, claimed after `since`, is not done yet (a
    worker that claimed it is about to handle it; older claims count as abandoned). Those in
    `mine` are left out: the asking worker orders its own updates by arrival."""
    found = exists().where(
        TelegramUpdate.chat_id == chat_id,
        TelegramUpdate.update_id < update_id,
        TelegramUpdate.done.is_(False),
        TelegramUpdate.received_at > since,
    )
    if mine:
        found = found.where(TelegramUpdate.update_id.not_in(list(mine)))
    async with sf() as s:
        return bool((await s.execute(select(found))).scalar())


FINISH = (
    update(TelegramUpdate)
    .where(TelegramUpdate.update_id == bindparam("uid"))
    .values(done=True, payload=None)
)


async def finish(sf: SessionFactory, update_id: int) -> None:
    """The update was handled: it is not taken up again, and its JSON is dropped."""
    # As `claim`: one statement, no ORM session.
    await in_transaction(engine_of(sf), lambda c: c.execute(FINISH, {"uid": update_id}))


async def waiting(s: AsyncSession, since: datetime, before: datetime) -> list[Waiting]:
    """Updates received in [since, before) and never handled, oldest first."""
    stmt = (
        select(
            TelegramUpdate.update_id,
            TelegramUpdate.chat_id,
            TelegramUpdate.payload,
            TelegramUpdate.replays,
        )
        .where(
            TelegramUpdate.done.is_(False),
            TelegramUpdate.payload.is_not(None),
            TelegramUpdate.received_at >= since,
            TelegramUpdate.received_at < before,
        )
        .order_by(TelegramUpdate.update_id)
    )
    return [
        Waiting(int(uid), chat, str(payload), int(replays or 0))
        for uid, chat, payload, replays in (await s.execute(stmt)).all()
    ]


async def claim_replay(s: AsyncSession, update_id: int, seen: int) -> bool:
    """Start handling a waiting update again: True for exactly one caller that read `seen`
    replays (a compare-and-set, as for the turns a stop cut)."""
    stmt = (
        update(TelegramUpdate)
        .where(
            TelegramUpdate.update_id == update_id,
            TelegramUpdate.replays == seen,
            TelegramUpdate.done.is_(False),
        )
        .values(replays=seen + 1)
    )
    return bool((await s.execute(stmt)).rowcount)  # type: ignore[attr-defined]


async def release_replay(s: AsyncSession, update_id: int) -> None:
    """A replay stopped by a clean shutdown: it does not count as a crash."""
    await s.execute(
        update(TelegramUpdate)
        .where(TelegramUpdate.update_id == update_id, TelegramUpdate.replays > 0)
        .values(replays=TelegramUpdate.replays - 1)
    )


async def drop(s: AsyncSession, update_id: int) -> None:
    """Done without handling it (again)."""
    await s.execute(FINISH, {"uid": update_id})


async def recorded(s: AsyncSession, user_id: int, message_id: int, since: datetime) -> bool:
    """Whether the turn of this Telegram message (user and message id) began (its message is
    stored since `since`): then the turn itself is continued or answered, not the update."""
    stmt = select(
        exists().where(
            Message.user_id == User.id,
            User.telegram_id == user_id,
            Message.telegram_message_id == message_id,
            Message.role == "user",
            Message.created_at >= since,
        )
    )
    return bool((await s.execute(stmt)).scalar())


async def prune(sf: SessionFactory, before: datetime) -> int:
    """Forget claims older than `before` (Telegram gives up retrying within a day)."""
    async with sf() as s, s.begin():
        res = await s.execute(delete(TelegramUpdate).where(TelegramUpdate.received_at < before))
        return int(res.rowcount or 0)  # type: ignore[attr-defined]
