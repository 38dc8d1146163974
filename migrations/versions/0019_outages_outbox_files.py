"""outbox: a queued reply keeps its buttons, and charts and files go through it too

Revision ID: 0019
Revises: 0018
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0019"
down_revision: str | Sequence[str] | None = "0018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.add_column(sa.Column("markup", sa.Text(), nullable=True))
        batch.add_column(sa.Column("data", sa.LargeBinary(), nullable=True))
        batch.add_column(sa.Column("filename", sa.String(length=255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("outbox") as batch:
        batch.drop_column("filename")
        batch.drop_column("data")
        batch.drop_column("markup")
