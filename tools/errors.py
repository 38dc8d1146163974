"""The few error types a tool (or anything below the app) may raise.

Each has one meaning. `public_text` is the one function that turns any of them (or any
other exception) into text a user may see or a table may keep: the chat's error reply, a
scheduled task's failure notice, the run ledger behind `/reminders history`, the code jobs
table. A provider's own error text can echo the request (its headers, the API key): it is
never passed on, only the HTTP status is.
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


GENERIC = "Something went wrong on my side; the details are in the log. Please try again."


def provider_text(exc: ProviderError) -> str:
    status = exc.status
    if status in (401, 403):
        return (
            f"The model provider refused our credentials (HTTP {status}); "
            "the admin should check LLM_API_KEY."
        )
    if status == 404:
        return (
            "The model provider does not know this model or URL (HTTP 404); "
            "the admin should check LLM_MODEL and LLM_BASE_URL."
        )
    if status is not None and 400 <= status < 500 and status != 429:
        return f"The model provider rejected the request (HTTP {status})."
    # Without a status the message is our own ("timeout", "connection"), never the body.
    what = f"HTTP {status}" if status else str(exc)
    return f"The model provider is not answering ({what}); try again in a minute."


def public_text(exc: BaseException) -> str:
    """The short text a user sees (or a table keeps) for any error; details go to the log."""
    if isinstance(exc, ProviderError):
        return provider_text(exc)
    if isinstance(exc, SidekickError):
        return str(exc)
    return GENERIC
