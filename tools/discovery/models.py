"""Which tool served which request: the memory behind loading a user's favourite tools."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import ForeignKey, Index, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class ToolUsage(Base):
    __tablename__ = "tool_usage"
    __table_args__ = (Index("ix_tool_usage_user_tool", "user_id", "tool"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(ForeignKey("users.id", ondelete="CASCADE"))
    tool: Mapped[str] = mapped_column(String(200))
    request_text: Mapped[str] = mapped_column(Text, default="")
    used_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
