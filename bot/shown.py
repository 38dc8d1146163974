"""Text as a person is shown it, with the bidi controls escaped. A provider's model name, a
page's title or a model's answer may carry U+202E and its kin, which reorder what is read
around them ("exe.txt" reads as "txt.exe"); they are shown as the six characters \\u202e
instead, where each adapter renders text for the person (bot/telegram/render.py, the
terminal's output, the dashboard's esc), so no one place has to remember it."""

from __future__ import annotations

import re

# Embeddings and overrides, isolates, the marks LRM/RLM and the Arabic letter mark.
BIDI = re.compile("[\u202a-\u202e\u2066-\u2069\u200e\u200f\u061c]")


def shown(text: str) -> str:
    return BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text) if BIDI.search(text) else text
