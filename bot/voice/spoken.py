"""What of an answer is read aloud: prose only, up to a limit.

Code blocks and links make no sense spoken (a voice reading out `https://` or a stack of
brackets), and the text reply beside the voice message has them; Markdown marks go too.
"""

from __future__ import annotations

import re

FENCE = re.compile(r"```.*?(?:```|\Z)", re.S)
INLINE_CODE = re.compile(r"`[^`\n]+`")
MD_LINK = re.compile(r"!?\[([^\]]*)\]\([^)]*\)")
URL = re.compile(r"(?:https?://|www\.)\S+")
MARKS = re.compile(r"(\*\*|__|~~|(?<!\w)[*_](?=\S)|(?<=\S)[*_](?!\w)|^#{1,6}\s+|^>\s?)", re.M)
BULLET = re.compile(r"^\s*(?:[-*+]|\d+[.)])\s+", re.M)
SENTENCE_END = re.compile(r"[.!?…](?=\s|$)")

CUT_NOTE = "That is as much as I read aloud; the rest is in the text."


def speakable(markdown: str) -> str:
    """The answer's prose, without code, links and Markdown marks."""
    text = FENCE.sub(" (code in the text) ", markdown)
    text = INLINE_CODE.sub(lambda m: m.group(0).strip("`"), text)
    text = MD_LINK.sub(lambda m: m.group(1), text)
    text = URL.sub("", text)
    text = BULLET.sub("", text)
    text = MARKS.sub("", text)
    text = re.sub(r"[ \t]+", " ", text)
    text = re.sub(r"\s*\n\s*", "\n", text)
    return text.strip()


def clip(text: str, limit: int) -> tuple[str, bool]:
    """At most `limit` characters, cut at the last sentence end (else a space) before it;
    True when something was cut. The note saying so is added by the caller."""
    if len(text) <= limit:
        return text, False
    head = text[:limit]
    ends = [m.end() for m in SENTENCE_END.finditer(head)]
    if ends and ends[-1] > limit // 3:
        return head[: ends[-1]].strip(), True
    space = head.rfind(" ")
    return (head[:space] if space > limit // 3 else head).strip() + "…", True


def script(markdown: str, limit: int) -> tuple[str, bool]:
    """The text to synthesise (with the note when cut), and whether it was cut."""
    budget = max(limit - len(CUT_NOTE) - 1, limit // 2)
    text = speakable(markdown)
    if len(text) <= limit:
        return text, False
    head, _ = clip(text, budget)
    return f"{head}\n{CUT_NOTE}", True
