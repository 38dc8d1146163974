"""Reminder settings (REMINDER_*), composed into the app's Settings by bot/config.py."""

from __future__ import annotations

from pydantic import BaseModel, Field


class ReminderSettings(BaseModel):
    # A recurring job whose newest missed run is older than this is skipped (logged in the
    # ledger), not delivered; one-shot reminders are always delivered, late if need be.
    reminder_misfire_hours: float = Field(default=24.0, gt=0)
    # Delivery attempts of one run (each already retries 429/5xx a few times) before it
    # is recorded as delivery_failed.
    reminder_delivery_attempts: int = Field(default=5, ge=1, le=50)
    # Chats delivered to at once; the messages of one chat always go in order.
    reminder_concurrency: int = Field(default=16, ge=1, le=64)
