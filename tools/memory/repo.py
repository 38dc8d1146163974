"""All SQL of the memory feature: the memories table, its sqlite-vec and FTS5 indexes, meta.

A memory is three rows written in one transaction: `memories` (the truth), `memory_vec`
(embedding; user partition, layer and expiry metadata) and `memory_fts` (words, with an
`owner` column so a MATCH stays inside one user). sqlite-vec cannot UPDATE a partition
key nor INSERT OR REPLACE, so changes are delete-then-insert; KNN uses `k = ?`.

On PostgreSQL the same functions run tools/memory/pg.py instead (pgvector and tsvector
tables of the same names); everything that is plain SQLAlchemy here serves both.

The reads by id (a recall's ranking facts and the rows it returns) are plain SQL with the
ids as one JSON parameter: the ORM's expanding IN of hundreds of bound values, its per-row
type processing and its instances cost most of the facts read.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from operator import itemgetter
from typing import Any, NamedTuple

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    CompoundSelect,
    Select,
    and_,
    bindparam,
    delete,
    func,
    literal,
    or_,
    select,
    text,
    type_coerce,
    union_all,
)
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.types import NullType

from db.engine import is_postgres
from db.models.core import ChatSession, Message
from tools.memory import pg
from tools.memory.models import Memory, MemoryMeta

# vec0 metadata columns take no NULL: "never expires" is the last second of year 9999.
NEVER = 253402300799


def epoch(when: datetime | None) -> int:
    return NEVER if when is None else int(when.timestamp())


async def insert(s: AsyncSession, memory: Memory, embedding: bytes | None) -> int:
    s.add(memory)
    await s.flush()
    await _index(s, memory, embedding)
    return memory.id


async def _index(s: AsyncSession, m: Memory, embedding: bytes | None) -> None:
    if m.superseded_by is not None:  # history: kept, never searched (a reindex, a copy)
        return
    if is_postgres(s):
        exp = epoch(m.expires_at)
        await pg.index(s, m.id, m.user_id, m.layer, exp, m.content, m.category, embedding)
        return
    if embedding is not None:
        await s.execute(
            text(
                "INSERT INTO memory_vec(memory_id, user_id, layer, expires_at, embedding) "
                "VALUES (:id, :user, :layer, :exp, :emb)"
            ),
            {
                "id": m.id,
                "user": m.user_id,
                "layer": m.layer,
                "exp": epoch(m.expires_at),
                "emb": embedding,
            },
        )
    await s.execute(
        text("INSERT INTO memory_fts(rowid, content, category, owner) VALUES (:id, :c, :cat, :o)"),
        {"id": m.id, "c": m.content, "cat": m.category or "", "o": _owner(m.user_id)},
    )


async def _unindex(s: AsyncSession, ids: Sequence[int]) -> None:
    for chunk in _chunks(ids):
        if is_postgres(s):
            await pg.unindex(s, chunk)
            continue
        marks = ",".join(str(int(i)) for i in chunk)
        await s.execute(text(f"DELETE FROM memory_vec WHERE memory_id IN ({marks})"))
        await s.execute(text(f"DELETE FROM memory_fts WHERE rowid IN ({marks})"))


def _chunks(ids: Sequence[int], size: int = 500) -> list[Sequence[int]]:
    return [ids[i : i + size] for i in range(0, len(ids), size)]


async def replace(s: AsyncSession, memory: Memory, embedding: bytes | None) -> None:
    """Re-index a changed memory (delete then insert: vec0 has no UPDATE of its keys)."""
    await s.flush()
    await _unindex(s, [memory.id])
    await _index(s, memory, embedding)


async def delete_ids(s: AsyncSession, ids: Sequence[int]) -> int:
    if not ids:
        return 0
    await _unindex(s, ids)
    total = 0
    for chunk in _chunks(ids):
        res = await s.execute(delete(Memory).where(Memory.id.in_(chunk)))
        total += res.rowcount or 0  # type: ignore[attr-defined]
    return total


async def get(s: AsyncSession, user_id: int, memory_id: int) -> Memory | None:
    stmt = select(Memory).where(Memory.id == memory_id, Memory.user_id == user_id)
    return (await s.execute(stmt)).scalar_one_or_none()


def _alive(now: datetime | BindParameter[datetime]) -> ColumnElement[bool]:
    """Not expired, and not replaced by a newer memory (that one is its history)."""
    return and_(
        or_(Memory.expires_at.is_(None), Memory.expires_at > now), Memory.superseded_by.is_(None)
    )


def _in(group: int | None) -> list[ColumnElement[bool]]:
    """Only what was said in this group (None: anywhere; the user's own chat reads all)."""
    return [] if group is None else [Memory.chat_id == group]


def _with_source() -> Select[Memory, str, datetime, datetime | None]:
    return select(Memory, ChatSession.name, ChatSession.started_at, ChatSession.ended_at).outerjoin(
        ChatSession, ChatSession.id == Memory.session_id
    )


@dataclass(frozen=True)
class Record:
    """A memory's columns as plain values, not an ORM instance (made from its Facts)."""

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


def _raw(column: Any) -> Any:
    """A time column read as the driver gives it (ISO text on SQLite, a datetime on
    PostgreSQL): no type processing a row; Facts parses the times it is asked for."""
    return type_coerce(column, NullType())


def _facts_of_rows() -> Select[*tuple[Any, ...]]:
    """Facts' columns (the _SQLITE read's, in its order) with the source session joined:
    auto-recall reads two such lists for every message (a Record and the UTC times made for
    each of ~20 rows cost more than the statement)."""
    m, cs = Memory.__table__.c, ChatSession.__table__.c
    return select(
        m.id, m.session_id, m.layer, m.certainty, _raw(m.updated_at), _raw(cs.ended_at),
        _raw(m.created_at), m.content.contains("?"), m.content, m.category, m.message_id,
        m.user_id, _raw(m.expires_at), cs.name, _raw(cs.started_at), m.chat_id,
    ).outerjoin(ChatSession, ChatSession.id == Memory.session_id)  # fmt: skip


def _count_alive(layer: bool) -> Select[int]:
    cond = [Memory.user_id == bindparam("user_id"), _alive(bindparam("now"))]
    if layer:
        cond.append(Memory.layer == bindparam("layer"))
    return select(func.count(Memory.id)).where(*cond)


# Built once: auto-recall counts the user's memories for every message.
_COUNT_ALIVE = {False: _count_alive(False), True: _count_alive(True)}


async def page(
    s: AsyncSession,
    user_id: int,
    layer: str | None,
    now: datetime,
    offset: int,
    limit: int,
    group: int | None = None,
) -> tuple[list[MemoryRow], int]:
    """One page of a user's live memories (of `group` only, when given), newest first, and
    how many there are."""
    params: dict[str, object] = {"user_id": user_id, "now": now}
    if layer:
        params["layer"] = layer
    count = _COUNT_ALIVE[bool(layer)]
    if group is not None:
        count = count.where(*_in(group))
    total = int((await s.execute(count, params)).scalar_one())
    if offset >= total:  # no rows to read (auto-recall asks this for every message)
        return [], total
    cond: list[ColumnElement[bool]] = [Memory.user_id == user_id, _alive(now), *_in(group)]
    if layer:
        cond.append(Memory.layer == layer)
    stmt = (
        _with_source()
        .where(*cond)
        .order_by(Memory.updated_at.desc(), Memory.id.desc())
        .offset(offset)
        .limit(limit)
    )
    return [MemoryRow(*r) for r in (await s.execute(stmt)).all()], total


def _one_alive(grouped: bool) -> Select[*tuple[Any, ...]]:
    cond = [Memory.user_id == bindparam("user_id"), _alive(bindparam("now"))]
    if grouped:
        cond.append(Memory.chat_id == bindparam("group"))
    return _facts_of_rows().where(*cond).limit(1)


def _top_long(grouped: bool) -> Select[*tuple[Any, ...]]:
    cond = [
        Memory.user_id == bindparam("user_id"),
        Memory.layer == "long",
        Memory.superseded_by.is_(None),
    ]
    if grouped:
        cond.append(Memory.chat_id == bindparam("group"))
    return (
        _facts_of_rows()
        .where(*cond)
        .order_by(Memory.certainty.desc(), Memory.updated_at.desc())
        .limit(bindparam("limit"))
    )


def _known(grouped: bool) -> CompoundSelect[*tuple[Any, ...]]:
    """_top_long's rows, then _one_alive's, each with a last column saying which (1: the
    long-term list): auto-recall asks both for every message, in one statement."""
    longs, one = _top_long(grouped).subquery(), _one_alive(grouped).subquery()
    return union_all(select(*longs.c, literal(1)), select(*one.c, literal(0)))


# Built once, as _COUNT_ALIVE: building and looking up the statement cost most of what the
# read took (20 rows).
_KNOWN = {False: _known(False), True: _known(True)}


async def known(
    s: AsyncSession, user_id: int, now: datetime, limit: int, group: int | None = None
) -> tuple[bool, list[Facts]]:
    """Whether the user has a live memory (said in `group`, when given), and up to `limit`
    of their long-term ones, most certain and most recent first: auto-recall's first read
    for every message. Each part walks an index and stops at its limit (a count or an
    ordered page reads all of a user's rows)."""
    params = {"user_id": user_id, "now": now, "limit": limit, "group": group}
    alive, longs = False, []
    for row in await s.execute(_KNOWN[group is not None], params):
        if row[-1]:
            longs.append(Facts._make(row[:-1]))
        else:
            alive = True
    return alive, longs


def _knn_sql(
    user_id: int, embedding: bytes, k: int, layer: str | None, now: datetime, n: int = 0
) -> tuple[str, dict[str, object]]:
    """One KNN search's FROM and WHERE and its parameters (its layer's numbered `n`, so
    several go in one statement, with _bm25_sql's of the same `k` and user): the rows of
    memory_vec nearest first, expired ones filtered in the index."""
    sql = (
        "FROM memory_vec WHERE embedding MATCH :emb AND k = :k "
        "AND user_id = :user AND expires_at > :expiry"
    )
    params: dict[str, object] = {"emb": embedding, "k": k, "user": user_id, "expiry": epoch(now)}
    if layer:
        sql += f" AND layer = :layer{n}"
        params[f"layer{n}"] = layer
    return sql, params


async def knn(
    s: AsyncSession, user_id: int, embedding: bytes, k: int, layer: str | None, now: datetime
) -> list[tuple[int, float]]:
    """Nearest memories of one user by cosine distance, expired ones filtered in the index."""
    if is_postgres(s):
        return await pg.knn(s, user_id, embedding, k, layer, epoch(now))
    sql, params = _knn_sql(user_id, embedding, k, layer, now)
    rows = await s.execute(text("SELECT memory_id, distance " + sql), params)
    return [(int(r[0]), float(r[1])) for r in rows.all()]


async def exact(s: AsyncSession, user_id: int, layer: str, content: str) -> Memory | None:
    stmt = select(Memory).where(
        Memory.user_id == user_id,
        Memory.layer == layer,
        func.lower(Memory.content) == content,
        Memory.superseded_by.is_(None),
    )
    return (await s.execute(stmt.limit(1))).scalar_one_or_none()


async def source_chat(
    s: AsyncSession, session_id: int | None, message_id: int | None
) -> int | None:
    """The group a memory's source session (or message's session) is held in; None: the
    user's own chat."""
    if session_id is None and message_id is not None:
        stmt = select(Message.session_id).where(Message.id == message_id)
        session_id = (await s.execute(stmt)).scalar_one_or_none()
    if session_id is None:
        return None
    chat = select(ChatSession.chat_id).where(ChatSession.id == session_id)
    return (await s.execute(chat)).scalar_one_or_none()


async def supersede(
    s: AsyncSession, user_id: int, old_id: int, new_id: int, now: datetime
) -> Memory | None:
    """Mark the user's live memory `old_id` as replaced by `new_id` and take it out of the
    indexes (its row stays as history); None when there is no such live memory."""
    old = await get(s, user_id, old_id)
    if old is None or old.id == new_id or old.superseded_by is not None:
        return None
    old.superseded_by, old.superseded_at = new_id, now
    await s.flush()
    await _unindex(s, [old.id])
    return old


async def rivals(
    s: AsyncSession, memory: Memory, lead: str, now: datetime, limit: int = 3
) -> list[Memory]:
    """The user's other live memories of this one's layer and category that start with the
    words `lead` (text.frame)."""
    pattern = lead.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + " %"
    stmt = (
        select(Memory)
        .where(
            Memory.user_id == memory.user_id,
            Memory.layer == memory.layer,
            Memory.category == memory.category,
            Memory.id != memory.id,
            _alive(now),
            *_in(memory.chat_id),  # in a group, never a private memory's words
            func.lower(Memory.content) != memory.content.lower(),
            func.lower(Memory.content).like(pattern, escape="\\"),
        )
        .order_by(Memory.id.desc())
        .limit(limit)
    )
    return list((await s.execute(stmt)).scalars())


async def replaced(
    s: AsyncSession, user_id: int, ids: Sequence[int], group: int | None = None
) -> list[Memory]:
    """The memories these ones replaced (said in `group`, when given), oldest replacement
    first."""
    if not ids:
        return []
    stmt = (
        select(Memory)
        .where(Memory.user_id == user_id, Memory.superseded_by.in_(list(ids)), *_in(group))
        .order_by(Memory.superseded_at, Memory.id)
    )
    return list((await s.execute(stmt)).scalars())


async def expired_ids(s: AsyncSession, now: datetime) -> list[int]:
    """Memories past their lifetime, and session memories whose session has ended."""
    stmt = select(Memory.id).where(Memory.expires_at.is_not(None), Memory.expires_at <= now)
    ended = (
        select(Memory.id)
        .join(ChatSession, ChatSession.id == Memory.session_id)
        .where(Memory.layer == "session", ChatSession.ended_at.is_not(None))
    )
    found = set((await s.execute(stmt)).scalars()) | set((await s.execute(ended)).scalars())
    return sorted(found)


async def session_ids(s: AsyncSession, user_id: int, session_id: int) -> list[int]:
    stmt = select(Memory.id).where(
        Memory.user_id == user_id, Memory.session_id == session_id, Memory.layer == "session"
    )
    return list((await s.execute(stmt)).scalars())


async def batch_after(s: AsyncSession, after_id: int, size: int) -> list[Memory]:
    stmt = select(Memory).where(Memory.id > after_id).order_by(Memory.id).limit(size)
    return list((await s.execute(stmt)).scalars())


async def count_user(s: AsyncSession, user_id: int) -> int:
    stmt = select(func.count(Memory.id)).where(Memory.user_id == user_id)
    return int((await s.execute(stmt)).scalar_one())


async def count_all(s: AsyncSession) -> int:
    return int((await s.execute(select(func.count(Memory.id)))).scalar_one())


async def count_vectors(s: AsyncSession) -> int:
    return int((await s.execute(text("SELECT count(*) FROM memory_vec"))).scalar_one())


async def recreate_vec(s: AsyncSession, dim: int) -> None:
    """Drop and recreate the vector index with another dimension (reindex)."""
    if is_postgres(s):
        return await pg.recreate_vec(s, dim)
    await s.execute(text("DROP TABLE IF EXISTS memory_vec"))
    await s.execute(
        text(
            "CREATE VIRTUAL TABLE memory_vec USING vec0("
            "memory_id integer primary key, user_id integer partition key, "
            f"layer text, expires_at integer, embedding float[{int(dim)}] distance_metric=cosine)"
        )
    )


async def vec_dim(s: AsyncSession) -> int | None:
    """The dimension memory_vec was created with, read from its schema."""
    if is_postgres(s):
        return await pg.vec_dim(s)
    row = (
        await s.execute(text("SELECT sql FROM sqlite_master WHERE name = 'memory_vec'"))
    ).scalar_one_or_none()
    if not row:
        return None
    m = re.search(r"float\[(\d+)\]", row)
    return int(m.group(1)) if m else None


async def meta(s: AsyncSession) -> dict[str, str]:
    return {k: v for k, v in (await s.execute(select(MemoryMeta.key, MemoryMeta.value))).all()}


async def set_meta(s: AsyncSession, values: dict[str, str]) -> None:
    for key, value in values.items():
        row = await s.get(MemoryMeta, key)
        if row is None:
            s.add(MemoryMeta(key=key, value=value))
        else:
            row.value = value


async def vectors_of(s: AsyncSession, ids: Sequence[int]) -> dict[int, bytes]:
    """The stored float32 vectors of these memories (those that have one)."""
    if not ids:
        return {}
    if is_postgres(s):
        return await pg.vectors_of(s, ids)
    marks = ",".join(str(int(i)) for i in ids)
    sql = f"SELECT memory_id, embedding FROM memory_vec WHERE memory_id IN ({marks})"
    return {int(r[0]): bytes(r[1]) for r in (await s.execute(text(sql))).all()}


async def contents(s: AsyncSession, user_id: int) -> list[str]:
    """The text of every memory of one user (expired ones too: for a word list)."""
    stmt = select(Memory.content).where(Memory.user_id == user_id)
    return list((await s.execute(stmt)).scalars())


# The reads by id: a recall's candidates and the rows it returns.


@dataclass(frozen=True)
class MemoryRow:
    """A memory with where it came from (session name and start), for tools and /memory."""

    memory: Memory | Record
    session_name: str | None
    session_started: datetime | None
    session_ended: datetime | None


class Facts(NamedTuple):
    """What ranking needs of a memory, read for every candidate and its neighbours
    (hundreds a recall): a row of _SQLITE as it comes (times raw: ISO text on SQLite,
    datetimes on PostgreSQL), one tuple a row with no work per field; a time is parsed when
    asked for, and the whole row (row_of) only for the few memories a recall returns."""

    id: int
    session_id: int | None
    layer: str
    certainty: float
    updated: Any
    ended: Any  # the source session's end
    created: Any
    asks: bool  # the text holds a question mark (0 or 1 on SQLite)
    content: str
    category: str | None
    message_id: int | None
    user_id: int
    expires: Any
    session_name: str | None
    session_started: Any
    chat_id: int | None  # the group it was said in (None: the user's own chat)

    @property
    def updated_at(self) -> datetime:
        return _when(self.updated)

    @property
    def created_at(self) -> datetime:
        return _when(self.created)

    @property
    def session_ended(self) -> bool:
        return self.ended is not None


# Facts' fields, in order (PostgreSQL's read, tools/memory/pg.py, returns the same).
_SQLITE = (
    "SELECT m.id, m.session_id, m.layer, m.certainty, m.updated_at, s.ended_at, "
    "m.created_at, instr(m.content, '?') > 0, m.content, m.category, m.message_id, "
    "m.user_id, m.expires_at, s.name, s.started_at, m.chat_id "
    "FROM memories m LEFT JOIN sessions s ON s.id = m.session_id "
    "WHERE m.id IN (SELECT value FROM json_each(:ids)) AND m.user_id + 0 = :user "
    "AND (m.expires_at IS NULL OR m.expires_at > :now) AND m.superseded_by IS NULL"
)


async def facts(
    s: AsyncSession, user_id: int, ids: Sequence[int], now: datetime
) -> dict[int, Facts]:
    """Ranking facts of these memories of this user that are still alive."""
    if not ids:
        return {}
    found: Sequence[Any]
    if is_postgres(s):
        found = await pg.facts_rows(s, user_id, ids, now)
    else:
        params = {"ids": json.dumps([int(i) for i in ids]), "user": user_id, "now": _stamp(now)}
        found = (await s.execute(text(_SQLITE), params)).all()
    return {f.id: f for f in map(Facts._make, found)}


def row_of(f: Facts) -> MemoryRow:
    """The full row of a memory whose facts were read."""
    record = Record(
        f.id,
        f.user_id,
        f.layer,
        f.content,
        f.category,
        f.certainty,
        f.session_id,
        f.message_id,
        f.created_at,
        f.updated_at,
        _maybe(f.expires),
    )
    return MemoryRow(record, f.session_name, _maybe(f.session_started), _maybe(f.ended))


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


# Word search: BM25 over memory_fts (FTS5) or, on PostgreSQL, its tsvector table, and the
# document counts that prune common query words.


def _owner(user_id: int) -> str:
    return f"u{user_id}"


def _bm25_sql(
    user_id: int, match: str, k: int, layers: Sequence[str] | None, now: datetime, scoped: bool
) -> tuple[str, dict[str, object]]:
    """The BM25 read as a WITH clause (`mine`: the user's best `k`, `hits`: the index's
    matches read) and its parameters."""
    layer_sql = ""
    params: dict[str, object] = {
        "q": f"owner : {_owner(user_id)} AND ({match})" if scoped else match,
        "k": k,
        "inner": k * 4,
        "user": user_id,
        "now": now.astimezone(UTC).replace(tzinfo=None),
    }
    if layers:
        names = [f":l{i}" for i in range(len(layers))]
        layer_sql = f" AND m.layer IN ({','.join(names)})"
        params.update({f"l{i}": v for i, v in enumerate(layers)})
    # FTS5 first (confined to the user by the owner column), then the row filters by primary
    # key. `user_id + 0` keeps the planner off ix_memories_user_layer: with it, it walks all
    # of the user's rows and probes the hits for each, several times slower for big users.
    sql = (
        "WITH hits AS MATERIALIZED (SELECT rowid AS id, bm25(memory_fts, 1.0, 0.3, 0.0) AS r "
        "FROM memory_fts WHERE memory_fts MATCH :q ORDER BY r LIMIT :inner), "
        "mine AS (SELECT h.id, -h.r AS score FROM hits h JOIN memories m ON m.id = h.id "
        "WHERE m.user_id + 0 = :user AND (m.expires_at IS NULL OR m.expires_at > :now)"
        + layer_sql
        + " ORDER BY score DESC LIMIT :k) "
    )
    return sql, params


# A row of a search: which part it answers, an id and a score or distance.
_BM25, _READ, _KNN = 0, 1, 2


async def bm25(
    s: AsyncSession,
    user_id: int,
    match: str,
    k: int,
    layers: Sequence[str] | None,
    now: datetime,
    scoped: bool = True,
) -> tuple[list[tuple[int, float]], bool]:
    """Best BM25 matches of one user (higher score is better); `match` is an FTS5 query.
    With them, whether they are all of the user's best `k` (always so scoped).

    `scoped=False` leaves the owner term out of the MATCH (the user is still filtered on
    the rows): for a user who owns most of the index, reading the owner's posting list
    costs more than it saves. Scores are the same either way (owner has weight 0), so the
    rows are the user's best `k` when `k` of them come back, or when the index's best
    matches read were all it had; else (False) the caller must ask again scoped."""
    if is_postgres(s):  # the user filter is a plain column there: no scoping needed
        return await pg.full_text(s, user_id, match, k, layers, now), True
    return (await search(s, user_id, None, [], match, k, layers, now, scoped))[1:]


async def search(
    s: AsyncSession,
    user_id: int,
    embedding: bytes | None,
    knn_layers: Sequence[str | None],
    match: str | None,
    k: int,
    layers: Sequence[str] | None,
    now: datetime,
    scoped: bool = True,
) -> tuple[list[tuple[int, float]], list[tuple[int, float]], bool]:
    """A recall's search in one statement: the `k` nearest memories of the user to
    `embedding` for each of `knn_layers` (None: every layer), as knn(), and the BM25
    matches of `match`, as bm25() with whether they are complete. Without an embedding or
    a match, that half is empty."""
    if is_postgres(s):
        near = []
        if embedding is not None:
            for layer in knn_layers:
                near += await pg.knn(s, user_id, embedding, k, layer, epoch(now))
        words = await pg.full_text(s, user_id, match, k, layers, now) if match else []
        return near, words, True
    head, params, parts = "", dict[str, object](), list[str]()
    if match is not None:
        head, params = _bm25_sql(user_id, match, k, layers, now, scoped)
        # The count of the index's matches read, so an unscoped read that found the whole
        # index's matches needs no second, scoped one.
        parts.append(f"SELECT {_BM25}, id, score FROM mine")
        parts.append(f"SELECT {_READ}, NULL, count(*) FROM hits")
    if embedding is not None:
        for n, layer in enumerate(knn_layers):
            sql, more = _knn_sql(user_id, embedding, k, layer, now, n)
            parts.append(f"SELECT {_KNN}, memory_id, distance " + sql)
            params.update(more)
    if not parts:
        return [], [], True
    rows = (await s.execute(text(head + " UNION ALL ".join(parts)), params)).all()
    near = [(int(r[1]), float(r[2])) for r in rows if r[0] == _KNN]
    words = [(int(r[1]), float(r[2])) for r in rows if r[0] == _BM25]
    words.sort(key=itemgetter(1), reverse=True)
    read = next((int(r[2]) for r in rows if r[0] == _READ), 0)
    return near, words, scoped or len(words) >= k or read < k * 4


# The tokenizer of memory_fts (migration 0003): query words are stemmed the same way.
_TOKENIZER = "porter unicode61 remove_diacritics 2"


async def doc_freqs(s: AsyncSession, words: Sequence[str]) -> dict[str, tuple[str, int]]:
    """word -> (its FTS5 term, how many memories of all users contain it).

    The words go through a temp FTS5 table with memory_fts's tokenizer (so "running" is
    looked up as "run"), then the counts come from an fts5vocab view of memory_fts."""
    if not words:
        return {}
    if is_postgres(s):
        return await pg.doc_freqs(s, words)
    found = await _vocab_rows(s, words)
    out = {}
    for i, w in enumerate(words):
        ts = found.get(i + 1, [])
        # A word FTS5 splits in several tokens is a phrase: at most as common as its rarest.
        out[w] = (" ".join(t for t, _ in ts), min((n for _, n in ts), default=0))
    return out


_TERM_TABLES = (
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_query_tok USING fts5(w, "
    f"tokenize='{_TOKENIZER}')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_query_terms "
    "USING fts5vocab(temp, memory_query_tok, 'instance')",
    "CREATE VIRTUAL TABLE IF NOT EXISTS temp.memory_fts_terms "
    "USING fts5vocab(main, memory_fts, 'row')",
)


_TERMS_MADE = "memory_term_tables"  # key in a connection's info: its temp tables exist


async def _vocab_rows(s: AsyncSession, words: Sequence[str]) -> dict[int, list[tuple[str, int]]]:
    """Word number -> its FTS5 terms and their counts. The temp tables live as long as the
    connection; writing them takes no lock on the main database, so a recall does not
    block writers. They are made once per connection (its `info` remembers), not with three
    statements for every recall: made outside a transaction, so no rollback takes them."""
    conn = await s.connection()
    if not conn.info.get(_TERMS_MADE):
        for ddl in _TERM_TABLES:
            await s.execute(text(ddl))
        raw = await conn.get_raw_connection()
        if not getattr(raw.driver_connection, "in_transaction", True):
            conn.info[_TERMS_MADE] = True
    # The words are rows 1..n, written over an earlier query's (no DELETE first: one
    # statement less a recall); rows past n left from a longer one are not read.
    await s.execute(
        text("INSERT OR REPLACE INTO temp.memory_query_tok(rowid, w) VALUES (:i, :w)"),
        [{"i": i + 1, "w": w} for i, w in enumerate(words)],
    )
    rows = await s.execute(
        text(
            "SELECT q.doc, q.term, coalesce(t.doc, 0) FROM temp.memory_query_terms q "
            "LEFT JOIN temp.memory_fts_terms t ON t.term = q.term WHERE q.doc <= :n"
        ),
        {"n": len(words)},
    )
    found: dict[int, list[tuple[str, int]]] = {}
    for doc, term, n in rows:
        found.setdefault(int(doc), []).append((str(term), int(n)))
    return found


async def set_fts_language(s: AsyncSession, lang: str) -> bool:
    """PostgreSQL: rebuild the tsvectors with this text search configuration if it changed
    (True then). SQLite's FTS5 tokenizer is fixed by migration 0003: nothing to do."""
    return await pg.set_language(s, lang) if is_postgres(s) else False


async def user_batch(
    s: AsyncSession, user_id: int, now: datetime, after_id: int, size: int, layer: str | None = None
) -> list[Memory]:
    """A user's live memories (of one layer, when given) with ids above `after_id`, in id
    order: an export reads them all a batch at a time."""
    cond = [Memory.user_id == user_id, _alive(now), Memory.id > after_id]
    if layer is not None:
        cond.append(Memory.layer == layer)
    stmt = select(Memory).where(*cond).order_by(Memory.id).limit(size)
    return list((await s.execute(stmt)).scalars())
