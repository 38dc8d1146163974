"""sessions and memories per chat; memories superseded by newer ones

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-06 08:00:00

A session belongs to one chat: `sessions.chat_id` is the group it is held in, NULL for the
user's own chat (their private chat with the bot, or the terminal), which is what every
existing session was. A memory keeps the chat it was said in (`memories.chat_id`, NULL: the
user's own chat), so a group answer reads only what was said in that group. A memory a newer
one replaced keeps its row as history (`superseded_by`, `superseded_at`) and leaves recall.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0028"
down_revision: str | Sequence[str] | None = "0027"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Nullable columns: a plain ALTER TABLE ... ADD COLUMN on both backends (no table copy).
    op.add_column("sessions", sa.Column("chat_id", sa.BigInteger(), nullable=True))
    op.add_column("memories", sa.Column("chat_id", sa.BigInteger(), nullable=True))
    op.add_column("memories", sa.Column("superseded_by", sa.Integer(), nullable=True))
    op.add_column("memories", sa.Column("superseded_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("memories") as batch:
        batch.drop_column("superseded_at")
        batch.drop_column("superseded_by")
        batch.drop_column("chat_id")
    with op.batch_alter_table("sessions") as batch:
        batch.drop_column("chat_id")
