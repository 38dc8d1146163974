"""The one place that turns Sidekick's errors into the short text a user sees.

The error types themselves live below the app (tools/errors.py), so tools and the
scheduler can raise them without importing bot/.
"""

from __future__ import annotations

from tools.errors import ConfigError, ProviderError, SidekickError, ToolError

__all__ = ["ConfigError", "ProviderError", "SidekickError", "ToolError", "user_text"]


def provider_text(exc: ProviderError) -> str:
    if advice := getattr(exc, "advice", None):  # a model call that knows what to do next
        return str(advice)
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
    what = f"HTTP {status}" if status else str(exc)
    return f"The model provider is not answering ({what}); try again in a minute."


def user_text(exc: BaseException) -> str:
    """The short text a user sees for any error; details go to the log only."""
    if isinstance(exc, ProviderError):
        return provider_text(exc)
    if isinstance(exc, SidekickError):
        return str(exc)
    return "Something went wrong on my side; the details are in the log. Please try again."
