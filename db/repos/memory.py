"""All SQL of the memory feature: the memories table, its sqlite-vec and FTS5 indexes, meta.

A memory is three rows written in one transaction: `memories` (the truth), `memory_vec`
(embedding; user partition, layer and expiry metadata) and `memory_fts` (words, with an
`owner` column so a MATCH stays inside one user). sqlite-vec cannot UPDATE a partition
key nor INSERT OR REPLACE, so changes are delete-then-insert; KNN uses `k = ?`.

On PostgreSQL the same functions run db/pg/memory.py instead (pgvector and tsvector tables
of the same names); everything that is plain SQLAlchemy here serves both.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    delete,
    func,
    or_,
    select,
    text,
)
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import is_postgres
from db.models.core import ChatSession
from db.models.memory import Memory, MemoryMeta
from db.pg import memory as pg
from db.repos.memory_read import Facts as Facts
from db.repos.memory_read import MemoryRow as MemoryRow
from db.repos.memory_read import Record as Record
from db.repos.memory_read import facts as facts
from db.repos.memory_read import row_of as row_of
from db.repos.memory_read import rows as rows
from db.repos.memory_words import _owner
from db.repos.memory_words import bm25 as bm25
from db.repos.memory_words import doc_freqs as doc_freqs
from db.repos.memory_words import set_fts_language as set_fts_language

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
    return or_(Memory.expires_at.is_(None), Memory.expires_at > now)


def _with_source() -> Select[Memory, str, datetime, datetime | None]:
    return select(Memory, ChatSession.name, ChatSession.started_at, ChatSession.ended_at).outerjoin(
        ChatSession, ChatSession.id == Memory.session_id
    )


def _count_alive(layer: bool) -> Select[int]:
    cond = [Memory.user_id == bindparam("user_id"), _alive(bindparam("now"))]
    if layer:
        cond.append(Memory.layer == bindparam("layer"))
    return select(func.count(Memory.id)).where(*cond)


# Built once: auto-recall counts the user's memories for every message.
_COUNT_ALIVE = {False: _count_alive(False), True: _count_alive(True)}


async def page(
    s: AsyncSession, user_id: int, layer: str | None, now: datetime, offset: int, limit: int
) -> tuple[list[MemoryRow], int]:
    """One page of a user's live memories, newest first, and how many there are."""
    params: dict[str, object] = {"user_id": user_id, "now": now}
    if layer:
        params["layer"] = layer
    total = int((await s.execute(_COUNT_ALIVE[bool(layer)], params)).scalar_one())
    if offset >= total:  # no rows to read (auto-recall asks this for every message)
        return [], total
    cond: list[ColumnElement[bool]] = [Memory.user_id == user_id, _alive(now)]
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


async def top_long(s: AsyncSession, user_id: int, limit: int) -> list[MemoryRow]:
    """The user's long-term memories, most certain and most recent first."""
    stmt = (
        _with_source()
        .where(Memory.user_id == user_id, Memory.layer == "long")
        .order_by(Memory.certainty.desc(), Memory.updated_at.desc())
        .limit(limit)
    )
    return [MemoryRow(*r) for r in (await s.execute(stmt)).all()]


async def knn(
    s: AsyncSession, user_id: int, embedding: bytes, k: int, layer: str | None, now: datetime
) -> list[tuple[int, float]]:
    """Nearest memories of one user by cosine distance, expired ones filtered in the index."""
    if is_postgres(s):
        return await pg.knn(s, user_id, embedding, k, layer, epoch(now))
    sql = (
        "SELECT memory_id, distance FROM memory_vec WHERE embedding MATCH :emb AND k = :k "
        "AND user_id = :user AND expires_at > :now"
    )
    params: dict[str, object] = {"emb": embedding, "k": k, "user": user_id, "now": epoch(now)}
    if layer:
        sql += " AND layer = :layer"
        params["layer"] = layer
    return [(int(r[0]), float(r[1])) for r in (await s.execute(text(sql), params)).all()]


async def exact(s: AsyncSession, user_id: int, layer: str, content: str) -> Memory | None:
    stmt = select(Memory).where(
        Memory.user_id == user_id, Memory.layer == layer, func.lower(Memory.content) == content
    )
    return (await s.execute(stmt.limit(1))).scalar_one_or_none()


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
    import re

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
