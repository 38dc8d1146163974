"""What the memory store hands back: store results, hits with their source, pages, status."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from tools.memory import repo


@dataclass(frozen=True)
class StoreResult:
    id: int
    updated: bool


@dataclass(frozen=True)
class MemoryHit:
    id: int
    layer: str
    content: str
    category: str | None
    certainty: float
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    relevance: float | None
    session_id: int | None
    session_name: str | None
    session_started: datetime | None
    message_id: int | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "layer": self.layer,
            "content": self.content,
            "category": self.category,
            "certainty": round(self.certainty, 2),
            "created_at": self.created_at.isoformat(timespec="minutes"),
        }
        if self.relevance is not None:
            out["relevance"] = round(self.relevance, 3)
        if self.session_name:
            out["source"] = self.source()
        return out

    def source(self) -> str:
        if not self.session_name:
            return "unknown session"
        when = self.session_started.strftime("%Y-%m-%d") if self.session_started else ""
        return (
            f"{self.session_name} ({when})"
            if when and when not in self.session_name
            else (self.session_name)
        )


@dataclass(frozen=True)
class MemoryPage:
    items: list[MemoryHit]
    total: int


@dataclass(frozen=True)
class IndexStatus:
    ok: bool
    backend: str
    dim: int | None
    stored: str | None
    detail: str


def hit(r: repo.MemoryRow, relevance: float | None = None) -> MemoryHit:
    m = r.memory
    return MemoryHit(
        m.id,
        m.layer,
        m.content,
        m.category,
        m.certainty,
        m.created_at,
        m.updated_at,
        m.expires_at,
        relevance,
        m.session_id,
        r.session_name,
        r.session_started,
        m.message_id,
    )
