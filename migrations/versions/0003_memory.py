"""memory: memories, memory_meta, the sqlite-vec index and the FTS5 index

Revision ID: 0003
Revises: 0001
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0003"
down_revision: str | Sequence[str] | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# The default embedder (WordLlama l2_supercat) has 256 dimensions; `sidekick memory
# reindex` recreates memory_vec when another embedder has another dimension.
DEFAULT_DIM = 256


def upgrade() -> None:
    op.create_table(
        "memories",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("layer", sa.String(length=16), nullable=False),
        sa.Column("content", sa.Text(), nullable=False),
        sa.Column("category", sa.String(length=40), nullable=True),
        sa.Column("certainty", sa.Float(), nullable=False),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.Column("message_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(), nullable=False),
        sa.Column("updated_at", sa.DateTime(), nullable=False),
        sa.Column("expires_at", sa.DateTime(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["message_id"], ["messages.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.create_index("ix_memories_user_layer", ["user_id", "layer", "id"], unique=False)
        batch_op.create_index("ix_memories_expires", ["expires_at"], unique=False)
        batch_op.create_index("ix_memories_session", ["session_id"], unique=False)
    op.create_table(
        "memory_meta",
        sa.Column("key", sa.String(length=64), nullable=False),
        sa.Column("value", sa.Text(), nullable=False),
        sa.PrimaryKeyConstraint("key"),
    )
    if op.get_bind().dialect.name == "postgresql":
        from tools.memory.pg_ddl import create_indexes

        create_indexes(op.execute, DEFAULT_DIM)
        return
    # User as partition key; layer and expiry (epoch seconds, far-future sentinel for
    # "never") as metadata columns so the KNN query filters inside the index.
    op.execute(
        "CREATE VIRTUAL TABLE memory_vec USING vec0("
        "memory_id integer primary key, user_id integer partition key, "
        f"layer text, expires_at integer, embedding float[{DEFAULT_DIM}] distance_metric=cosine)"
    )
    # `owner` holds "u<user id>" so a MATCH can be confined to one user inside FTS5.
    op.execute(
        "CREATE VIRTUAL TABLE memory_fts USING fts5("
        "content, category, owner, tokenize='porter unicode61 remove_diacritics 2')"
    )


def downgrade() -> None:
    op.execute("DROP TABLE IF EXISTS memory_fts")  # both dialects use these two names
    op.execute("DROP TABLE IF EXISTS memory_vec")
    op.drop_table("memory_meta")
    with op.batch_alter_table("memories", schema=None) as batch_op:
        batch_op.drop_index("ix_memories_session")
        batch_op.drop_index("ix_memories_expires")
        batch_op.drop_index("ix_memories_user_layer")
    op.drop_table("memories")
