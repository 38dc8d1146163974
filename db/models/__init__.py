"""All ORM models; importing this package registers every table on Base.metadata."""

from db.models.base import Base
from db.models.core import ChatSession, Message, ToolCallRecord, User

__all__ = ["Base", "ChatSession", "Message", "ToolCallRecord", "User"]
