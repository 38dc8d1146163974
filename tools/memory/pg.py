"""The memory indexes' SQL on PostgreSQL: pgvector KNN, tsvector full-text search, upkeep.

Called by tools/memory/repo.py with the same arguments as its SQLite code, so the store above
does not know which database it runs on. Vectors travel as float32 bytes like on SQLite and
are turned into pgvector's text form here (no driver codec needed)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

import numpy as np
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from tools.memory.pg_ddl import DEFAULT_LANGUAGE, vec_ddl

_VEC = "CAST(CAST(:emb AS text) AS vector)"
_CFG = "CAST(CAST(:lang AS text) AS regconfig)"
# ts_rank weights {D, C, B, A}: content is A (1.0), category B (0.3), as FTS5's bm25 weights.
_RANK = "ts_rank('{0, 0, 0.3, 1.0}', f.tsv, t.q, 1)"
_QUOTED = re.compile(r'"([^"]*)"')


def vector_literal(embedding: bytes) -> str:
    return "[" + ",".join(map(str, np.frombuffer(embedding, dtype=np.float32).tolist())) + "]"


def naive_utc(when: datetime) -> datetime:
    return when.astimezone(UTC).replace(tzinfo=None)


async def language(s: AsyncSession) -> str:
    """The text search configuration the tsvectors were built with (memory_meta)."""
    sql = "SELECT value FROM memory_meta WHERE key = 'fts_language'"
    return str((await s.execute(text(sql))).scalar_one_or_none() or DEFAULT_LANGUAGE)


async def set_language(s: AsyncSession, lang: str) -> bool:
    """Use another text search configuration: rebuilds every tsvector. False if unchanged;
    an unknown configuration raises (PostgreSQL's error names it)."""
    if lang == await language(s):
        return False
    await s.execute(text(f"SELECT {_CFG}"), {"lang": lang})
    await s.execute(
        text(
            "INSERT INTO memory_meta (key, value) VALUES ('fts_language', :lang) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value"
        ),
        {"lang": lang},
    )
    await s.execute(
        text(
            f"UPDATE memory_fts f SET tsv = {_tsv('m.content', 'm.category')} "
            "FROM memories m WHERE m.id = f.memory_id"
        ),
        {"lang": lang},
    )
    return True


def _tsv(content: str, category: str) -> str:
    return (
        f"setweight(to_tsvector({_CFG}, {content}), 'A') || "
        f"setweight(to_tsvector({_CFG}, coalesce({category}, '')), 'B')"
    )


async def index(
    s: AsyncSession, mid: int, user_id: int, layer: str, expires: int, content: str,
    category: str | None, embedding: bytes | None,
) -> None:  # fmt: skip
    if embedding is not None:
        await s.execute(
            text(
                "INSERT INTO memory_vec (memory_id, user_id, layer, expires_at, embedding) "
                f"VALUES (:id, :user, :layer, :exp, {_VEC})"
            ),
            {
                "id": mid,
                "user": user_id,
                "layer": layer,
                "exp": expires,
                "emb": vector_literal(embedding),
            },
        )
    lang = await language(s)
    await s.execute(
        text(
            "INSERT INTO memory_fts (memory_id, user_id, tsv) "
            f"VALUES (:id, :user, {_tsv(':c', ':cat')})"
        ),
        {
            "id": mid,
            "user": user_id,
            "c": content,
            "cat": category or "",
            "lang": lang,
        },
    )


async def unindex(s: AsyncSession, ids: Sequence[int]) -> None:
    params = {"ids": [int(i) for i in ids]}
    await s.execute(text("DELETE FROM memory_vec WHERE memory_id = ANY(:ids)"), params)
    await s.execute(text("DELETE FROM memory_fts WHERE memory_id = ANY(:ids)"), params)


async def knn(
    s: AsyncSession, user_id: int, embedding: bytes, k: int, layer: str | None, now: int
) -> list[tuple[int, float]]:
    """Nearest of one user's live vectors by cosine distance. The planner takes the HNSW
    index for big tables and the user index for small users; with HNSW, iterative scans
    (pgvector 0.8) keep going until `k` rows pass the user filter."""
    await s.execute(text("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)"))
    sql = (
        f"SELECT memory_id, embedding <=> {_VEC} AS d FROM memory_vec "
        "WHERE user_id = :user AND expires_at > :now"
    )
    params: dict[str, Any] = {"emb": vector_literal(embedding), "user": user_id, "now": now}
    if layer:
        sql += " AND layer = :layer"
        params["layer"] = layer
    sql += " ORDER BY d LIMIT :k"
    params["k"] = k
    rows = (await s.execute(text(sql), params)).all()
    return sorted(((int(r[0]), float(r[1])) for r in rows), key=lambda t: t[1])


async def full_text(
    s: AsyncSession, user_id: int, match: str, k: int, layers: Sequence[str] | None, now: datetime
) -> list[tuple[int, float]]:
    """Best full-text matches of one user, higher score better. `match` is the expression the
    store builds (quoted words OR-ed). ts_rank alone has no notion of a word's rarity, so each
    word's rank is weighted by its BM25 IDF over all memories, as FTS5's bm25() does."""
    words = [w for w in _QUOTED.findall(match) if w.strip()]
    if not words:
        return []
    sql = (
        "WITH n AS (SELECT CASE WHEN c.reltuples > 10000 THEN c.reltuples "
        "ELSE (SELECT count(*) FROM memory_fts) END AS n FROM pg_class c "
        "WHERE c.oid = 'memory_fts'::regclass), "
        f"a AS (SELECT DISTINCT phraseto_tsquery({_CFG}, w) AS q "
        "FROM unnest(CAST(:words AS text[])) AS w), "
        "terms AS MATERIALIZED (SELECT a.q, ln(1 + (n.n - d.df + 0.5) / (d.df + 0.5)) AS idf "
        "FROM a CROSS JOIN n CROSS JOIN LATERAL "
        "(SELECT count(*) AS df FROM memory_fts f WHERE f.tsv @@ a.q) d "
        "WHERE numnode(a.q) > 0), "
        f"hits AS (SELECT f.memory_id, sum(t.idf * {_RANK}) AS score "
        "FROM terms t JOIN memory_fts f ON f.tsv @@ t.q "
        "WHERE f.user_id = :user GROUP BY f.memory_id) "
        "SELECT h.memory_id, h.score FROM hits h JOIN memories m ON m.id = h.memory_id "
        "WHERE (m.expires_at IS NULL OR m.expires_at > :now)"
    )
    params: dict[str, Any] = {
        "words": words,
        "user": user_id,
        "now": naive_utc(now),
        "k": k,
        "lang": await language(s),
    }
    if layers:
        sql += " AND m.layer = ANY(:layers)"
        params["layers"] = list(layers)
    sql += " ORDER BY h.score DESC, h.memory_id LIMIT :k"
    return [(int(r[0]), float(r[1])) for r in (await s.execute(text(sql), params)).all()]


async def doc_freqs(s: AsyncSession, words: Sequence[str]) -> dict[str, tuple[str, int]]:
    """word -> (its tsquery, how many memories of all users hold it, counted up to 100k)."""
    sql = (
        f"SELECT w, array_to_string(tsvector_to_array(to_tsvector({_CFG}, w)), ' '), "
        "(SELECT count(*) FROM (SELECT 1 FROM memory_fts f "
        f"WHERE f.tsv @@ plainto_tsquery({_CFG}, w) LIMIT 100000) x) "
        "FROM unnest(CAST(:words AS text[])) AS w"
    )
    rows = await s.execute(text(sql), {"words": list(words), "lang": await language(s)})
    return {str(w): (str(term), int(n)) for w, term, n in rows}


async def facts_rows(s: AsyncSession, user_id: int, ids: Sequence[int], now: datetime) -> list[Any]:
    """The columns tools/memory/repo.py reads on SQLite, in the same order."""
    sql = (
        "SELECT m.id, m.session_id, m.layer, m.certainty, m.updated_at, s.ended_at, "
        "m.created_at, strpos(m.content, '?') > 0, m.content, m.category, m.message_id, "
        "m.user_id, m.expires_at, s.name, s.started_at, m.chat_id "
        "FROM memories m LEFT JOIN sessions s ON s.id = m.session_id "
        "WHERE m.id = ANY(:ids) AND m.user_id = :user "
        "AND (m.expires_at IS NULL OR m.expires_at > :now) AND m.superseded_by IS NULL"
    )
    params = {"ids": [int(i) for i in ids], "user": user_id, "now": naive_utc(now)}
    return list((await s.execute(text(sql), params)).all())


async def recreate_vec(s: AsyncSession, dim: int) -> None:
    await s.execute(text("DROP TABLE IF EXISTS memory_vec"))
    for sql in vec_ddl(dim):
        await s.execute(text(sql))


async def vec_dim(s: AsyncSession) -> int | None:
    sql = (
        "SELECT atttypmod FROM pg_attribute "
        "WHERE attrelid = to_regclass('memory_vec') AND attname = 'embedding'"
    )
    dim = (await s.execute(text(sql))).scalar_one_or_none()
    return int(dim) if dim and dim > 0 else None


async def vectors_of(s: AsyncSession, ids: Sequence[int]) -> dict[int, bytes]:
    sql = "SELECT memory_id, CAST(embedding AS real[]) FROM memory_vec WHERE memory_id = ANY(:ids)"
    rows = (await s.execute(text(sql), {"ids": [int(i) for i in ids]})).all()
    return {int(r[0]): np.asarray(r[1], dtype=np.float32).tobytes() for r in rows}
