"""The memory feature's reads by id, in plain SQL: the ranking facts of a recall's
candidates (with the columns a returned memory shows, so the recall's answer needs no
second read) and the rows of a few memories. Re-exported by db/repos/memory.py.

Plain SQL with the ids as one JSON parameter: the ORM's expanding IN of hundreds of bound
values, its per-row type processing and its instances cost most of the facts read."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import is_postgres
from db.models.memory import Memory
from db.pg import memory as pg


@dataclass(frozen=True)
class Record:
    """A memory's columns as plain values, read without an ORM instance."""

    id: int
    user_id: int
    layer: str
    content: str
    category: str | None
    certainty: float
    session_id: int | None
    message_id: int | None
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None


@dataclass(frozen=True)
class MemoryRow:
    """A memory with where it came from (session name and start), for tools and /memory."""

    memory: Memory | Record
    session_name: str | None
    session_started: datetime | None
    session_ended: datetime | None


@dataclass(frozen=True)
class Facts:
    """What ranking needs of a memory: read for every candidate and its neighbours. The
    rest of its row (`source`, raw values) is turned into a MemoryRow by row_of() only for
    the few memories a recall returns."""

    id: int
    session_id: int | None
    layer: str
    certainty: float
    updated_at: datetime
    session_ended: bool
    created_at: datetime | None  # parsed only when asked for (dated=True)
    asks: bool  # the text holds a question mark
    source: tuple[Any, ...] = ()

    @property
    def content(self) -> str:
        return str(self.source[3])


# After the facts: content, category, message_id, user_id, created_at, expires_at,
# session name, started_at and ended_at (raw: ISO text on SQLite, datetimes on PostgreSQL).
_SQLITE = (
    "SELECT m.id, m.session_id, m.layer, m.certainty, m.updated_at, s.ended_at, "
    "m.created_at, instr(m.content, '?') > 0, m.content, m.category, m.message_id, "
    "m.user_id, m.expires_at, s.name, s.started_at "
    "FROM memories m LEFT JOIN sessions s ON s.id = m.session_id "
    "WHERE m.id IN (SELECT value FROM json_each(:ids)) AND m.user_id + 0 = :user "
    "AND (m.expires_at IS NULL OR m.expires_at > :now)"
)


async def _read(s: AsyncSession, user_id: int, ids: Sequence[int], now: datetime) -> list[Any]:
    if is_postgres(s):
        return await pg.facts_rows(s, user_id, ids, now)
    params = {"ids": json.dumps([int(i) for i in ids]), "user": user_id, "now": _stamp(now)}
    return list((await s.execute(text(_SQLITE), params)).all())


async def facts(
    s: AsyncSession, user_id: int, ids: Sequence[int], now: datetime, dated: bool = False
) -> dict[int, Facts]:
    """Ranking facts of these memories of this user that are still alive."""
    if not ids:
        return {}
    out = {}
    for mid, sid, layer, certainty, updated, ended, created, asks, *rest in await _read(
        s, user_id, ids, now
    ):
        out[int(mid)] = Facts(
            int(mid),
            sid,
            layer,
            float(certainty),
            _when(updated),
            ended is not None,
            _when(created) if dated else None,
            bool(asks),
            (created, updated, ended, *rest),
        )
    return out


def row_of(f: Facts) -> MemoryRow:
    """The full row of a memory whose facts were read."""
    created, _, ended, content, category, message_id, user_id, expires, name, started = f.source
    record = Record(
        f.id,
        int(user_id),
        f.layer,
        content,
        category,
        f.certainty,
        f.session_id,
        message_id,
        f.created_at or _when(created),
        f.updated_at,
        _maybe(expires),
    )
    return MemoryRow(record, name, _maybe(started), _maybe(ended))


async def rows(s: AsyncSession, user_id: int, ids: Sequence[int], now: datetime) -> list[MemoryRow]:
    """These memories of this user that are still alive, with their source session, by id."""
    found = await facts(s, user_id, ids, now)
    return [row_of(found[mid]) for mid in sorted(found)]


def _when(value: str | datetime) -> datetime:
    if isinstance(value, datetime):
        return value.replace(tzinfo=UTC)
    return datetime.fromisoformat(value).replace(tzinfo=UTC)


def _maybe(value: str | datetime | None) -> datetime | None:
    return None if value is None else _when(value)


def _stamp(when: datetime) -> str:
    """A time as SQLAlchemy's SQLite DateTime stores it (UTC, naive), for plain-SQL compares."""
    return when.astimezone(UTC).replace(tzinfo=None).strftime("%Y-%m-%d %H:%M:%S.%f")
