"""The one place that turns Sidekick's errors into the short text a user sees.

The error types and the masking function itself live below the app (tools/errors.py), so
tools and the scheduler raise them and mask a provider's error text the same way the chat
does, without importing bot/.
"""

from __future__ import annotations

from tools.errors import (
    ConfigError,
    ProviderError,
    SidekickError,
    ToolError,
    provider_text,
    public_text,
)

__all__ = [
    "ConfigError",
    "ProviderError",
    "SidekickError",
    "ToolError",
    "provider_text",
    "user_text",
]


def user_text(exc: BaseException) -> str:
    """The short text a user sees for any error; details go to the log only."""
    return public_text(exc)
