"""The one place that turns Sidekick's errors into the short text a user sees (the types and
the masking live in tools/errors.py, so tools and the scheduler need no bot/ import)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tools.errors import (
    ConfigError,
    ProviderError,
    SidekickError,
    ToolError,
    provider_text,
    public_text,
)

if TYPE_CHECKING:
    from db.migrate import SchemaMismatch

__all__ = [
    "ConfigError",
    "ProviderError",
    "SidekickError",
    "ToolError",
    "provider_text",
    "public_text",
]


def schema_text(exc: SchemaMismatch) -> str:
    """One line: what the database lacks, and what to do (migrations cannot add it: the
    database's stamp says they already did)."""
    return (
        f"the database does not match this version's models ({exc}), although its "
        "migrations are recorded as applied; no process starts on it. Restore a backup made "
        "by this version (`sidekick restore`), or keep the file and report these lines"
    )
