"""The core tables (and those of features not yet in their own folder); a feature in its
own folder declares its tables in its Feature, and bot/features.py registers them all."""

from db.models.base import Base
from db.models.core import ChatSession, Message, ToolCallRecord, User
from db.models.inbox import TelegramUpdate
from db.models.outbox import OutboxMessage
from db.models.resume import TurnResume
from db.models.voice import VoicePrefs

__all__ = [
    "Base",
    "ChatSession",
    "Message",
    "OutboxMessage",
    "TelegramUpdate",
    "ToolCallRecord",
    "TurnResume",
    "User",
    "VoicePrefs",
]
