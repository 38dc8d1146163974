"""The memory indexes on PostgreSQL: a pgvector table with an HNSW cosine index and a tsvector
table with a GIN index, the counterparts of SQLite's vec0 `memory_vec` and FTS5 `memory_fts`.

Both are keyed by memory id and carry the user id, so KNN and full-text search filter by user
inside one table, the way the SQLite partition key and owner column do."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

# PostgreSQL's text search configuration of memory full-text search. Not a setting
# (MEMORY_FTS_LANGUAGE was): recall rests on the embeddings, which read every language;
# full-text search adds exact words, and English stemming is what it was built and tested with.
DEFAULT_LANGUAGE = "english"


def vec_ddl(dim: int) -> list[str]:
    return [
        "CREATE TABLE memory_vec ("
        "memory_id integer PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE, "
        "user_id integer NOT NULL, layer varchar(16) NOT NULL, expires_at bigint NOT NULL, "
        f"embedding vector({int(dim)}) NOT NULL)",
        "CREATE INDEX ix_memory_vec_user ON memory_vec (user_id, layer)",
        "CREATE INDEX ix_memory_vec_hnsw ON memory_vec USING hnsw (embedding vector_cosine_ops)",
    ]


def create_indexes(execute: Callable[[str], Any], dim: int) -> None:
    """The DDL of migration 0003 on PostgreSQL (`execute` runs one statement)."""
    execute("CREATE EXTENSION IF NOT EXISTS vector")
    for sql in vec_ddl(dim):
        execute(sql)
    execute(
        "CREATE TABLE memory_fts ("
        "memory_id integer PRIMARY KEY REFERENCES memories(id) ON DELETE CASCADE, "
        "user_id integer NOT NULL, tsv tsvector NOT NULL)"
    )
    execute("CREATE INDEX ix_memory_fts_tsv ON memory_fts USING gin (tsv)")
    execute("CREATE INDEX ix_memory_fts_user ON memory_fts (user_id)")
    execute(f"INSERT INTO memory_meta (key, value) VALUES ('fts_language', '{DEFAULT_LANGUAGE}')")
