"""The few error types a tool (or anything below the app) may raise, and `public_text`, the
one way any exception becomes text a user may see or a table may keep. A provider's own
error text can echo the request (its headers, the API key): only its HTTP status is told.
"""

from __future__ import annotations

import errno


class SidekickError(Exception):
    """Base of Sidekick's own errors."""


class ConfigError(SidekickError):
    """A missing or invalid setting: the CLI prints one line and exits with status 2."""


class ProviderError(SidekickError):
    """An outside model endpoint (chat, embeddings) failed after retries."""

    # What the user should do next, when the failure knows (an overflowed context, a call
    # past its deadline); None: provider_text says what the status means.
    advice: str | None = None

    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


class ToolError(Exception):
    """A tool failed in a way the model should hear about: the text goes back as the result."""


GENERIC = "Something went wrong on my side; the details are in the log. Please try again."


def provider_text(exc: ProviderError) -> str:
    if exc.advice:
        return exc.advice
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


# What the database driver says, by what happened (SQLite's and PostgreSQL's wording); a
# busy database is db.engine.busy's to tell.
_STORAGE = {
    "full": ("database or disk is full", "no space left on device", "disk full", "disk i/o error"),
    "gone": (
        "unable to open database file",
        "readonly database",
        "no such table",
        "database disk image is malformed",
    ),
}
STORAGE_TEXT = {
    "busy": (
        "My database was busy for too long, so I could not take your message; please send "
        "it again in a minute."
    ),
    "full": (
        "The server's disk is full, so I could not save your message or answer it; the admin "
        "has to free some space. Please send it again later."
    ),
    "gone": (
        "My database is not usable right now (the admin can see why in the log), so I could "
        "not take your message; please send it again later."
    ),
}


def storage_problem(exc: BaseException) -> str | None:
    """ "busy", "full" or "gone" when `exc` (or what caused it) is the database failing."""
    # Imported here: a bad setting's ConfigError comes from this module before (and without)
    # the database layer.
    from db.engine import busy

    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if busy(e):
            return "busy"
        if isinstance(e, OSError) and e.errno == errno.ENOSPC:
            return "full"
        text = str(e).lower()
        if type(e).__name__ in ("OperationalError", "DatabaseError", "DiskFullError"):
            for problem, needles in _STORAGE.items():
                if any(n in text for n in needles):
                    return problem
        todo += [e.__cause__, e.__context__, getattr(e, "orig", None)]
    return None


def public_text(exc: BaseException) -> str:
    """The short text a user sees (or a table keeps) for any error; details go to the log."""
    if isinstance(exc, ProviderError):
        return provider_text(exc)
    if (problem := storage_problem(exc)) is not None:
        return STORAGE_TEXT[problem]
    if isinstance(exc, SidekickError):
        return str(exc)
    return GENERIC
