"""message kind (text, voice, photo, document, ...)

Revision ID: 0009
Revises: 0008
Create Date: 2026-11-23 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009"
down_revision: str | Sequence[str] | None = "0008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.add_column(
            sa.Column("kind", sa.String(length=16), nullable=False, server_default="text")
        )


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("kind")
