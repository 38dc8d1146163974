"""one line of migrations: merge the code, sessions and tool-usage branches

Revision ID: 0006
Revises: 0002, 0004, 0005
Create Date: 2026-11-23 09:30:00

Every migration after this one has exactly one parent, so `alembic heads` is one row.
"""

from collections.abc import Sequence

revision: str = "0006"
down_revision: str | Sequence[str] | None = ("0002", "0004", "0005")
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
