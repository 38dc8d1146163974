"""telegram_updates: update ids taken by a worker (several webhook workers)

Revision ID: 0010
Revises: 0007
Create Date: 2026-11-23 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010"
down_revision: str | Sequence[str] | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "telegram_updates",
        sa.Column("update_id", sa.BigInteger(), autoincrement=False, nullable=False),
        sa.Column("chat_id", sa.BigInteger(), nullable=True),
        sa.Column("done", sa.Boolean(), nullable=False, server_default=sa.false()),
        sa.Column("received_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("update_id"),
    )
    op.create_index("ix_telegram_updates_received", "telegram_updates", ["received_at"])
    op.create_index("ix_telegram_updates_chat", "telegram_updates", ["chat_id", "update_id"])


def downgrade() -> None:
    op.drop_index("ix_telegram_updates_chat", table_name="telegram_updates")
    op.drop_index("ix_telegram_updates_received", table_name="telegram_updates")
    op.drop_table("telegram_updates")
