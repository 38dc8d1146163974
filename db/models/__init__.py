"""The core tables; a feature declares its own tables in its Feature, and bot/features.py
registers them all."""

from db.models.base import Base
from db.models.core import ChatSession, Message, ToolCallRecord, User
from db.models.inbox import TelegramUpdate
from db.models.outbox import OutboxMessage
from db.models.resume import RoundInFlight, TurnResume

__all__ = [
    "Base",
    "ChatSession",
    "Message",
    "OutboxMessage",
    "RoundInFlight",
    "TelegramUpdate",
    "ToolCallRecord",
    "TurnResume",
    "User",
]
