"""code jobs by OpenCode: the model, steps, duration, files and summary of each job, and
when its result was delivered

Revision ID: 0016
Revises: 0015
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0016"
down_revision: str | Sequence[str] | None = "0015"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("code_jobs", schema=None) as batch_op:
        batch_op.add_column(
            sa.Column("model", sa.String(length=200), nullable=False, server_default="")
        )
        batch_op.add_column(sa.Column("steps", sa.Integer(), nullable=False, server_default="0"))
        batch_op.add_column(
            sa.Column("duration_ms", sa.Double(), nullable=False, server_default="0")
        )
        batch_op.add_column(sa.Column("files", sa.Text(), nullable=False, server_default=""))
        batch_op.add_column(sa.Column("summary", sa.Text(), nullable=True))
        batch_op.add_column(sa.Column("delivered_at", sa.DateTime(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("code_jobs", schema=None) as batch_op:
        for name in ("delivered_at", "summary", "files", "duration_ms", "steps", "model"):
            batch_op.drop_column(name)
