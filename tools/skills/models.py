"""Installed skills: one row each (its files live in DATA_DIR/skills/<name>/)."""

from __future__ import annotations

from datetime import datetime

from sqlalchemy import Boolean, Integer, String, Text
from sqlalchemy.orm import Mapped, mapped_column

from db.models.base import Base, UTCDateTime, utcnow


class Skill(Base):
    __tablename__ = "skills"

    name: Mapped[str] = mapped_column(String(48), primary_key=True)
    description: Mapped[str] = mapped_column(Text)
    enabled: Mapped[bool] = mapped_column(Boolean, default=True)
    files: Mapped[int] = mapped_column(Integer, default=1)
    sha256: Mapped[str] = mapped_column(String(64))  # of the files as allowed
    installed_at: Mapped[datetime] = mapped_column(UTCDateTime, default=utcnow)
