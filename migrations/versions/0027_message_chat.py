"""messages: the chat a user message came from, so a turn a restart cut goes on there

Revision ID: 0027
Revises: 0024
Create Date: 2026-12-06 08:05:00

A group member's message was continued after a restart in the member's private chat, as
the message kept only its user. A nullable column: NULL is the user's own chat (every
message before this one).
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


def downgrade() -> None:
    with op.batch_alter_table("messages") as batch:
        batch.drop_column("chat_id")
