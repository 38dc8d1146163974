"""The memory feature's word search: BM25 over memory_fts (FTS5) or, on PostgreSQL, its
tsvector table (db/pg/memory.py), and the document counts that prune common query words.
Re-exported by db/repos/memory.py, where the rest of the memory SQL lives."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from db.engine import is_postgres
from db.pg import memory as pg


def _owner(user_id: int) -> str:
    return f"u{user_id}"


async def bm25(
    s: AsyncSession,
    user_id: int,
    match: str,
    k: int,
    layers: Sequence[str] | None,
    now: datetime,
    scoped: bool = True,
) -> list[tuple[int, float]]:
    """Best BM25 matches of one user (higher score is better); `match` is an FTS5 query.

    `scoped=False` leaves the owner term out of the MATCH (the user is still filtered on
    the rows): for a user who owns most of the index, reading the owner's posting list
    costs more than it saves. Scores are the same either way (owner has weight 0), so when
    at least `k` rows come back they are exactly the user's best `k`; fewer means the
    caller must ask again scoped."""
    if is_postgres(s):  # the user filter is a plain column there: no scoping needed
        return await pg.full_text(s, user_id, match, k, layers, now)
    layer_sql = ""
    params: dict[str, object] = {
        "q": f"owner : {_owner(user_id)} AND ({match})" if scoped else match,
        "k": k,
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
        "FROM memory_fts WHERE memory_fts MATCH :q ORDER BY r LIMIT :inner) "
        "SELECT h.id, -h.r AS score FROM hits h JOIN memories m ON m.id = h.id "
        "WHERE m.user_id + 0 = :user AND (m.expires_at IS NULL OR m.expires_at > :now)"
        + layer_sql
        + " ORDER BY score DESC LIMIT :k"
    )
    params["inner"] = k * 4
    return [(int(r[0]), float(r[1])) for r in (await s.execute(text(sql), params)).all()]


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


async def _vocab_rows(s: AsyncSession, words: Sequence[str]) -> dict[int, list[tuple[str, int]]]:
    """Word number -> its FTS5 terms and their counts. The temp tables live as long as the
    connection; writing them takes no lock on the main database, so a recall does not
    block writers."""
    for ddl in _TERM_TABLES:
        await s.execute(text(ddl))
    await s.execute(text("DELETE FROM temp.memory_query_tok"))
    await s.execute(
        text("INSERT INTO temp.memory_query_tok(rowid, w) VALUES (:i, :w)"),
        [{"i": i + 1, "w": w} for i, w in enumerate(words)],
    )
    rows = await s.execute(
        text(
            "SELECT q.doc, q.term, coalesce(t.doc, 0) FROM temp.memory_query_terms q "
            "LEFT JOIN temp.memory_fts_terms t ON t.term = q.term"
        )
    )
    found: dict[int, list[tuple[str, int]]] = {}
    for doc, term, n in rows:
        found.setdefault(int(doc), []).append((str(term), int(n)))
    return found


async def set_fts_language(s: AsyncSession, lang: str) -> bool:
    """PostgreSQL: rebuild the tsvectors with this text search configuration if it changed
    (True then). SQLite's FTS5 tokenizer is fixed by migration 0003: nothing to do."""
    return await pg.set_language(s, lang) if is_postgres(s) else False
