"""inbox updates: each Telegram update is kept until it is handled, and taken up at start-up

Revision ID: 0023
Revises: 0022
Create Date: 2026-11-28 09:45:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0023"
down_revision: str | Sequence[str] | None = "0022"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("telegram_updates") as batch:
        batch.add_column(sa.Column("payload", sa.Text(), nullable=True))
        batch.add_column(
            sa.Column("replays", sa.Integer(), nullable=False, server_default=sa.text("0"))
        )


def downgrade() -> None:
    with op.batch_alter_table("telegram_updates") as batch:
        batch.drop_column("replays")
        batch.drop_column("payload")
