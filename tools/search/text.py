"""HTML fragments (Brave descriptions, SearXNG content) → short plain text."""

from __future__ import annotations

import re
from html.parser import HTMLParser

SNIPPET_CHARS = 300
TITLE_CHARS = 200
_SPACE = re.compile(r"\s+")
_SKIP = {"script", "style", "noscript", "template"}


class _Collector(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.parts: list[str] = []
        self._skipping = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag in _SKIP:
            self._skipping += 1
        elif tag in {"br", "p", "div", "li"}:
            self.parts.append(" ")

    def handle_endtag(self, tag: str) -> None:
        if tag in _SKIP and self._skipping:
            self._skipping -= 1

    def handle_data(self, data: str) -> None:
        if not self._skipping:
            self.parts.append(data)


def plain(fragment: object) -> str:
    """Tags dropped, entities decoded, whitespace collapsed. Non-strings give ""."""
    if not isinstance(fragment, str) or not fragment:
        return ""
    parser = _Collector()
    parser.feed(fragment)
    parser.close()
    return _SPACE.sub(" ", "".join(parser.parts)).strip()


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, cut at a word boundary when one is near, with an ellipsis."""
    if len(text) <= limit:
        return text
    cut = text[: limit - 1]
    space = cut.rfind(" ")
    if space > limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:.-") + "…"


def snippet(fragment: object) -> str:
    return clip(plain(fragment), SNIPPET_CHARS)


def title(fragment: object) -> str:
    return clip(plain(fragment), TITLE_CHARS)
