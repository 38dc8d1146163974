"""memories: an index in auto-recall's long-term order, so its top 20 read 20 rows

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-06 05:40:00

Auto-recall offers a user's long-term memories most certain and most recent first for every
message (tools/memory/repo.top_long). Without this index the query read and sorted every
long-term memory of the user; with it SQLite walks the index backwards and stops at the
limit (bench/data_growth.py).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0024"
down_revision: str | Sequence[str] | None = "0023"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain CREATE INDEX on both backends (no batch: the table is not copied).
    op.create_index(
        "ix_memories_user_layer_rank", "memories", ["user_id", "layer", "certainty", "updated_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_memories_user_layer_rank", table_name="memories")
