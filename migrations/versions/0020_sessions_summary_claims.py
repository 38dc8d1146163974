"""sessions: one summary writer at a time per session (leases on session_archives), and
each user turn's [context] block kept with it (messages.context)

Revision ID: 0020
Revises: 0019
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0020"
down_revision: str | Sequence[str] | None = "0019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("session_archives", schema=None) as batch_op:
        batch_op.add_column(sa.Column("claimed_until", sa.DateTime(), nullable=True))
        batch_op.add_column(sa.Column("compressing_until", sa.DateTime(), nullable=True))
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.add_column(sa.Column("context", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("messages", schema=None) as batch_op:
        batch_op.drop_column("context")
    with op.batch_alter_table("session_archives", schema=None) as batch_op:
        batch_op.drop_column("compressing_until")
        batch_op.drop_column("claimed_until")
