"""trust: an "always" grant says whether it covers scheduled tasks' runs (a grant given in
a chat does not), and a question whether a scheduled run asked it

Revision ID: 0018
Revises: 0017
Create Date: 2026-11-28 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0018"
down_revision: str | Sequence[str] | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # Grants given before this covered scheduled runs: they keep doing so.
    with op.batch_alter_table("approval_grants") as batch:
        batch.add_column(
            sa.Column("scheduled", sa.Boolean(), nullable=False, server_default=sa.true())
        )
    with op.batch_alter_table("approval_grants") as batch:
        batch.alter_column("scheduled", server_default=sa.false())
    with op.batch_alter_table("approval_log") as batch:
        batch.add_column(
            sa.Column("scheduled", sa.Boolean(), nullable=False, server_default=sa.false())
        )


def downgrade() -> None:
    with op.batch_alter_table("approval_log") as batch:
        batch.drop_column("scheduled")
    with op.batch_alter_table("approval_grants") as batch:
        batch.drop_column("scheduled")
