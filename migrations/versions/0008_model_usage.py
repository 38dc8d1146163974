"""model usage: one row per model call; users' model choice, usage footer, budget warnings

Revision ID: 0008
Revises: 0006
Create Date: 2026-11-23 09:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008"
down_revision: str | Sequence[str] | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "model_usage",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("at", sa.DateTime(), nullable=False),
        sa.Column("user_id", sa.Integer(), nullable=True),
        sa.Column("session_id", sa.Integer(), nullable=True),
        sa.Column("request_id", sa.String(length=40), nullable=True),
        sa.Column("provider_id", sa.String(length=200), nullable=True),
        sa.Column("purpose", sa.String(length=20), nullable=False),
        sa.Column("model", sa.String(length=200), nullable=False),
        sa.Column("prompt_tokens", sa.Integer(), nullable=False),
        sa.Column("completion_tokens", sa.Integer(), nullable=False),
        sa.Column("cached_tokens", sa.Integer(), nullable=False),
        sa.Column("reasoning_tokens", sa.Integer(), nullable=False),
        sa.Column("estimated", sa.Boolean(), nullable=False),
        sa.Column("cost_usd", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(["user_id"], ["users.id"], ondelete="SET NULL"),
        sa.ForeignKeyConstraint(["session_id"], ["sessions.id"], ondelete="SET NULL"),
        sa.PrimaryKeyConstraint("id"),
    )
    op.create_index("ix_model_usage_at", "model_usage", ["at"])
    op.create_index("ix_model_usage_user_at", "model_usage", ["user_id", "at"])
    op.create_index("ix_model_usage_session", "model_usage", ["session_id"])
    op.create_index("ix_model_usage_request_id", "model_usage", ["request_id"])
    # SQLite adds columns in place (no table copy): existing users get the defaults.
    op.add_column("users", sa.Column("llm_model", sa.String(length=200), nullable=True))
    op.add_column(
        "users",
        sa.Column("usage_footer", sa.Boolean(), nullable=False, server_default=sa.false()),
    )
    op.add_column("users", sa.Column("usage_warned", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("users") as batch:
        batch.drop_column("usage_warned")
        batch.drop_column("usage_footer")
        batch.drop_column("llm_model")
    op.drop_index("ix_model_usage_request_id", table_name="model_usage")
    op.drop_index("ix_model_usage_session", table_name="model_usage")
    op.drop_index("ix_model_usage_user_at", table_name="model_usage")
    op.drop_index("ix_model_usage_at", table_name="model_usage")
    op.drop_table("model_usage")
