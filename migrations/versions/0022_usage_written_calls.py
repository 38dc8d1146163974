"""usage: how many of a model call's tool calls the model wrote out as text

Revision ID: 0022
Revises: 0021
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0022"
down_revision: str | Sequence[str] | None = "0021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.add_column(
            sa.Column("written_calls", sa.Integer(), nullable=False, server_default="0")
        )


def downgrade() -> None:
    with op.batch_alter_table("model_usage") as batch:
        batch.drop_column("written_calls")
