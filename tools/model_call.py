"""Who a model call is for and why: what a TextModel user passes so the call is metered
(usage recorded, budgets checked) by whatever the app wired in as the model."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Purpose = Literal["chat", "archive", "code", "scheduled", "speech"]

PURPOSE_LABELS: dict[str, str] = {
    "chat": "chat",
    "archive": "archive summary",
    "code": "code generation",
    "scheduled": "scheduled task",
    "speech": "voice replies (characters)",
}


@dataclass(frozen=True)
class ModelCall:
    purpose: Purpose
    user_id: int | None = None  # users.id
    session_id: int | None = None
    request_id: str | None = None


class BudgetExceeded(Exception):
    """A budget or token cap is used up: no model was called. The text says which and until
    when, in one sentence a user can read."""
