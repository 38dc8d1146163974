"""check-ins in groups (bot/checkins)

Revision ID: 0034
Revises: 0032
Create Date: 2026-12-06 11:20:00

A group gets a brief only when a member asked for it there (checkin_groups); a run's ledger
row names its chat (0: the person's private chat), and one slot a day is claimed per person
and chat.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

from db.models.base import UTCDateTime

revision: str = "0034"
down_revision: str | Sequence[str] | None = "0032"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "checkin_groups",
        sa.Column("chat_id", sa.BigInteger(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=False),
        sa.Column("enabled", sa.Boolean(), nullable=False),
        sa.Column("brief_at", sa.String(length=5), nullable=False),
        sa.Column("created_at", UTCDateTime(), nullable=False),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="CASCADE"),
        sa.PrimaryKeyConstraint("chat_id"),
    )
    op.create_index("ix_checkin_groups_user_id", "checkin_groups", ["user_id"])
    with op.batch_alter_table("checkin_runs") as batch:
        batch.add_column(sa.Column("chat_id", sa.BigInteger(), nullable=False, server_default="0"))
        batch.drop_constraint("uq_checkin_runs_slot", type_="unique")
        batch.create_unique_constraint(
            "uq_checkin_runs_slot", ["user_id", "chat_id", "day", "slot"]
        )


def downgrade() -> None:
    with op.batch_alter_table("checkin_runs") as batch:
        batch.drop_constraint("uq_checkin_runs_slot", type_="unique")
    op.execute("DELETE FROM checkin_runs WHERE chat_id != 0")
    with op.batch_alter_table("checkin_runs") as batch:
        batch.drop_column("chat_id")
        batch.create_unique_constraint("uq_checkin_runs_slot", ["user_id", "day", "slot"])
    op.drop_index("ix_checkin_groups_user_id", table_name="checkin_groups")
    op.drop_table("checkin_groups")
