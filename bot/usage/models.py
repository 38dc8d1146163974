"""One row per model call: the provider's token counts, what the call was for, and its cost."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Float, ForeignKey, Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class ModelUsage(Base):
    __tablename__ = "model_usage"
    __table_args__ = (
        Index("ix_model_usage_at", "at"),
        Index("ix_model_usage_user_at", "user_id", "at"),
        Index("ix_model_usage_session", "session_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
    # Kept when a user or session is deleted: spending happened all the same.
    user_id: Mapped[int | None] = mapped_column(ForeignKey("users.id", ondelete="SET NULL"))
    session_id: Mapped[int | None] = mapped_column(ForeignKey("sessions.id", ondelete="SET NULL"))
    request_id: Mapped[str | None] = mapped_column(String(40), index=True)  # messages.request_id
    provider_id: Mapped[str | None] = mapped_column(String(200))  # the provider's completion id
    purpose: Mapped[str] = mapped_column(String(20))  # chat | archive | code | scheduled
    model: Mapped[str] = mapped_column(String(200))
    prompt_tokens: Mapped[int] = mapped_column(Integer, default=0)
    completion_tokens: Mapped[int] = mapped_column(Integer, default=0)
    cached_tokens: Mapped[int] = mapped_column(Integer, default=0)
    reasoning_tokens: Mapped[int] = mapped_column(Integer, default=0)
    # True when the provider sent no usage and the counts come from our tokenizer.
    estimated: Mapped[bool] = mapped_column(Boolean, default=False)
    # Tool calls the model wrote out as text instead of sending them (bot/llm/written.py).
    written_calls: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # USD at the prices in force when the call was made; NULL when the model has no price.
    cost_usd: Mapped[float | None] = mapped_column(Float)
