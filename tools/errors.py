"""The few error types a tool (or anything below the app) may raise.

Each has one meaning; `bot/errors.py` is the one place that turns them into user text.
"""

from __future__ import annotations


class SidekickError(Exception):
    """Base of Sidekick's own errors."""


class ConfigError(SidekickError):
    """A missing or invalid setting: the CLI prints one line and exits with status 2."""


class ProviderError(SidekickError):
    """An outside model endpoint (chat, embeddings) failed after retries."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ToolError(Exception):
    """A tool failed in a way the model should hear about: the text goes back as the result."""
