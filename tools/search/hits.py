"""What every backend takes and gives: a query, hits, and a failure an admin can act on."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, Protocol

from tools.search import text

Kind = Literal["web", "news"]
TimeRange = Literal["day", "week", "month", "year"]


@dataclass(frozen=True)
class Query:
    text: str
    kind: Kind = "web"
    max_results: int = 5
    language: str | None = None
    time_range: TimeRange | None = None

    def key(self) -> tuple[Any, ...]:
        """Backend-independent cache key: the same question gets the same answer."""
        text = " ".join(self.text.split()).casefold()
        lang = (self.language or "").casefold()
        return (text, self.kind, self.max_results, lang, self.time_range)


@dataclass(frozen=True)
class Hit:
    title: str
    url: str
    snippet: str
    date: str | None = None

    def as_dict(self) -> dict[str, str]:
        out = {"title": self.title, "url": self.url, "snippet": self.snippet}
        if self.date:
            out["date"] = self.date
        return out


class BackendError(Exception):
    """A backend failed. `detail` says what happened, `fix` what the admin can do about it."""

    def __init__(self, detail: str, fix: str = "") -> None:
        super().__init__(detail)
        self.detail = detail
        self.fix = fix

    def __str__(self) -> str:
        return f"{self.detail} Fix: {self.fix}" if self.fix else self.detail


class Backend(Protocol):
    name: str  # "searxng" | "brave"
    label: str  # what an admin calls it, with where it lives

    async def search(self, query: Query) -> list[Hit]: ...


def short_date(value: object) -> str | None:
    """ISO timestamps → "YYYY-MM-DD" or "YYYY-MM-DD HH:MM"; other text is kept (clipped)."""
    if not isinstance(value, str) or not value.strip():
        return None
    raw = value.strip()
    try:
        when = datetime.fromisoformat(raw.replace("Z", "+00:00"))
    except ValueError:
        return raw[:40]
    if (when.hour, when.minute, when.second) == (0, 0, 0):
        return when.strftime("%Y-%m-%d")
    return when.strftime("%Y-%m-%d %H:%M")


def dedupe(hits: list[Hit], limit: int) -> list[Hit]:
    """The first hit of each URL, in order, at most `limit`."""
    first: dict[str, Hit] = {}
    for hit in hits:
        first.setdefault(hit.url, hit)
    return list(first.values())[:limit]


def hit_from(raw: object, snippet_field: str, date_fields: tuple[str, ...]) -> Hit | None:
    """One backend result as a Hit (backends differ only in where the snippet and the date
    live); None when it is not a dict with an http(s) URL."""
    if not isinstance(raw, dict):
        return None
    url = raw.get("url")
    if not isinstance(url, str) or not url.startswith(("http://", "https://")):
        return None
    date = next((d for d in (short_date(raw.get(f)) for f in date_fields) if d), None)
    title = text.title(raw.get("title")) or url
    return Hit(title, url, text.snippet(raw.get(snippet_field)), date)
