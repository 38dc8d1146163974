"""How the reminder scheduler delivers: fixed tuning, not read from the environment.

These were REMINDER_* variables; no operator needed to change them, so they are the defaults
of the scheduler's own parameters (tests and bench/reminders.py still pass other values).
"""

from __future__ import annotations

from pydantic import BaseModel, Field

# A recurring job whose newest missed run is older than this is skipped (logged in the
# ledger); a one-shot is always delivered, late if need be. A day: a bot down over night
# still sends the morning's recurring reminder late, while a weekly one missed for days is
# skipped rather than arriving out of context.
MISFIRE_HOURS = 24.0
# Delivery attempts of one run before it is delivery_failed. Each attempt already retries
# 429/5xx a few times; five with doubling backoff cover a Telegram outage of half an hour.
DELIVERY_ATTEMPTS = 5
# Chats delivered to at once (each chat's messages in order): well under Telegram's ~30
# messages/s per bot.
CONCURRENCY = 16


class ReminderSettings(BaseModel):
    reminder_misfire_hours: float = Field(default=MISFIRE_HOURS, gt=0)
    reminder_delivery_attempts: int = Field(default=DELIVERY_ATTEMPTS, ge=1, le=50)
    reminder_concurrency: int = Field(default=CONCURRENCY, ge=1, le=64)
