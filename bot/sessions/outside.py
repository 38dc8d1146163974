"""A session as its memory may be written from: the user's own words, and what Sidekick said
in turns that read nothing from outside. A turn that read a web page, search results, an MCP
tool's answer or a file (marked where it was stored: tools/effects.py OUTSIDE_MARK) keeps
the user's message, loses the outside content itself and Sidekick's words after it, which
may repeat it (a bank, an account number, a link, an "instruction"), and says in one line
that outside content was read. So the archive summary and the facts it keeps
(bot/sessions/archive.py) cannot carry a page's words into memory as the user's."""

from __future__ import annotations

from collections.abc import Sequence

from db.models.core import Message
from tools.effects import OUTSIDE_MARK

READ = "(Sidekick read outside content here: not shown, and not the user's words.)"


def _copy(m: Message, content: str, role: str | None = None) -> Message:
    """A detached copy with other content (the stored row stays as it is)."""
    return Message(id=m.id, session_id=m.session_id, user_id=m.user_id, role=role or m.role,
                   content=content, created_at=m.created_at)  # fmt: skip


def without_outside(messages: Sequence[Message]) -> list[Message]:
    out: list[Message] = []
    read = False  # this turn (since the user's last message) read outside content
    for m in messages:
        content = m.content or ""
        if m.role == "user":
            own, mark, _ = content.partition(OUTSIDE_MARK)
            read = bool(mark)
            if read:  # a file came with the message: the user's caption is theirs
                out += [_copy(m, own.rstrip()), _copy(m, READ, "assistant")]
            else:
                out.append(m)
        elif OUTSIDE_MARK in content:
            if not read:
                out.append(_copy(m, READ, "assistant"))
            read = True
        elif not (read and m.role == "assistant"):
            out.append(m)
    return out
