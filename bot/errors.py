"""The few error types Sidekick uses, and the one place that turns them into user text."""

from __future__ import annotations


class SidekickError(Exception):
    """Base: `user_message` is the short text a person may see."""

    def user_message(self) -> str:
        return str(self)


class ConfigError(SidekickError):
    """A missing or invalid setting: the CLI prints one line and exits with status 2."""


class ProviderError(SidekickError):
    """The model endpoint failed after retries."""

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status

    def user_message(self) -> str:
        if self.status in (401, 403):
            return (
                f"The model provider refused our credentials (HTTP {self.status}); "
                "the admin should check LLM_API_KEY."
            )
        if self.status == 404:
            return (
                "The model provider does not know this model or URL (HTTP 404); "
                "the admin should check LLM_MODEL and LLM_BASE_URL."
            )
        if self.status is not None and 400 <= self.status < 500 and self.status != 429:
            return f"The model provider rejected the request (HTTP {self.status})."
        what = f"HTTP {self.status}" if self.status else str(self)
        return f"The model provider is not answering ({what}); try again in a minute."


class UserError(SidekickError):
    """A bad command argument: the text is a one-line usage message."""


def user_text(exc: BaseException) -> str:
    """The short text a user sees for any error; details go to the log only."""
    if isinstance(exc, SidekickError):
        return exc.user_message()
    return "Something went wrong on my side; the details are in the log. Please try again."
