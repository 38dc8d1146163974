"""messages: the chat a user message came from; rounds_in_flight: a writing tool round running


Revision ID: 0027
Revises: 0024
Create Date: 2026-12-06 08:05:00

A group member's message was continued after a restart in the member's private chat, as
the message kept only its user. A nullable column: NULL is the user's own chat (every
message before this one).

A writing tool call the process stopped in was run again by the continuation; each writing
call that starts is now kept until its round is recorded (db/models/resume.py).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0027"
down_revision: str | Sequence[str] | None = "0024"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    # ADD COLUMN on both backends (no batch: the table is not copied).
    op.add_column("messages", sa.Column("chat_id", sa.BigInteger(), nullable=True))
    op.create_table(
        "rounds_in_flight",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("request_id", sa.String(length=40), nullable=False),
        sa.Column("call_id", sa.String(length=100), nullable=False),
        sa.Column("message", sa.Text(), nullable=False),
        sa.Column("started_at", sa.DateTime(), nullable=False),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_rounds_in_flight_request_id", "rounds_in_flight", ["request_id"])


def downgrade() -> None:
    op.drop_index("ix_rounds_in_flight_request_id", table_name="rounds_in_flight")
    op.drop_table("rounds_in_flight")
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("chat_id")
