"""Readable text out of a fetched page (trafilatura for HTML)."""

from __future__ import annotations

import json

from tools.base import ToolError
from tools.fetch.fetch import Page

HTML_TYPES = ("text/html", "application/xhtml+xml", "")


def decode(page: Page) -> str:
    return page.body.decode(page.encoding or "utf-8", errors="replace")


def extract(page: Page) -> tuple[str, str]:
    """(title, text) of the page; ToolError for content that has no readable text."""
    if page.content_type in HTML_TYPES:
        html = decode(page)
        import trafilatura  # lxml and friends: loaded on the first fetch, not at start

        text = trafilatura.extract(
            html, url=page.url, include_comments=False, include_tables=True, favor_recall=True
        )
        meta = trafilatura.extract_metadata(html)
        title = (meta.title if meta and meta.title else "") or ""
        if not text:
            raise ToolError(f"{page.url[:200]}: no readable text found on the page")
        return title, text
    if page.content_type.startswith("text/"):
        return "", decode(page)
    if page.content_type.endswith("json"):
        raw = decode(page)
        try:
            return "", json.dumps(json.loads(raw), ensure_ascii=False, indent=1)
        except ValueError:
            return "", raw
    raise ToolError(
        f"{page.url[:200]}: content type {page.content_type or 'unknown'} has no readable text"
    )
