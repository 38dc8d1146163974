"""repair: what 0008 makes, on a database whose stamp skipped it

Issue 13's merge released a 0009 (messages.kind) whose parent was 0006; issue 12's merge then
chained 0006 -> 0008 -> 0009. A database made in between is stamped 0009, so Alembic counts
0008 as applied, and model_usage and three users columns never came. 0008's own steps run
here for such a database; on any other (0008 applied) nothing happens.

Revision ID: 0021
Revises: 0020
Create Date: 2026-11-28 09:00:00
"""

import importlib.util
from collections.abc import Sequence
from pathlib import Path

import sqlalchemy as sa
from alembic import op

revision: str = "0021"
down_revision: str | Sequence[str] | None = "0020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    inspector = sa.inspect(op.get_bind())
    if "model_usage" in inspector.get_table_names():
        return
    if {c["name"] for c in inspector.get_columns("users")} & {"llm_model", "usage_footer"}:
        raise RuntimeError("users has 0008's columns but not its model_usage table")
    # 0008 exactly as released (a released migration never changes), run once more.
    path = Path(__file__).with_name("0008_model_usage.py")
    spec = importlib.util.spec_from_file_location("sidekick_migration_0008", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.upgrade()


def downgrade() -> None:
    """Nothing: on a database that needed the repair, 0008's downgrade undoes it."""
