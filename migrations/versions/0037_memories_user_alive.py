"""memories: an index in the memory list's order, with what "alive" reads

Revision ID: 0037
Revises: 0034
Create Date: 2026-12-06 11:40:00

The dashboard's memory list (tools/memory/repo.page) counts a user's live memories and shows
them newest first, a page at a time. Without this index SQLite read every memory of the user
from the table to count them and sorted them all for every page (the last page of 10,000:
30 ms of SQL). With it the count reads only the index, and a page walks the index in order:
`superseded_by` is an equality (IS NULL) before the order's columns, `id` makes the order
total, and `expires_at` is there so that the "alive" test needs no table row
(bench/dashboard.py).
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0037"
down_revision: str | Sequence[str] | None = "0034"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # A plain CREATE INDEX on both backends (no batch: the table is not copied).
    op.create_index(
        "ix_memories_user_alive",
        "memories",
        ["user_id", "superseded_by", "updated_at", "id", "expires_at"],
    )


def downgrade() -> None:
    op.drop_index("ix_memories_user_alive", table_name="memories")
