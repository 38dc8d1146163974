"""Whose words a message carries. A forwarded message is its author's, not the person's who
forwarded it; text they quote from another message (Telegram's quotes, replies to a message
in another chat) is that message's author's. Both are outside content (tools/effects.py):
marked where the model reads them, so what such text asks for is asked of the person first
(bot/approvals/gate.py) and never remembered as theirs. The person's own words stay first
and unmarked (the session's summary keeps them: bot/sessions/archive.py)."""

from __future__ import annotations

from aiogram.types import (
    Chat,
    Message,
    MessageOrigin,
    MessageOriginChannel,
    MessageOriginChat,
    MessageOriginHiddenUser,
    MessageOriginUser,
    User,
)

from tools.effects import outside_note

NAME_CHARS = 80


def _chat(chat: Chat) -> str:
    return chat.title or chat.full_name or (f"@{chat.username}" if chat.username else str(chat.id))


def _user(user: User) -> str:
    return f"{user.full_name} (@{user.username})" if user.username else user.full_name


def author(origin: MessageOrigin) -> str:
    """Who wrote a message, as its origin names them."""
    if isinstance(origin, MessageOriginUser):
        name = _user(origin.sender_user)
    elif isinstance(origin, MessageOriginHiddenUser):
        name = origin.sender_user_name
    elif isinstance(origin, MessageOriginChat):
        name = _chat(origin.sender_chat)
    elif isinstance(origin, MessageOriginChannel):
        name = _chat(origin.chat)
    else:
        name = "someone"
    return " ".join(name.split())[:NAME_CHARS] or "someone"


def _others(user: User | None, message: Message) -> bool:
    """Written by someone other than the person and this bot (whose words are the model's)."""
    sender, me = message.from_user, message.bot.id if message.bot is not None else None
    return user is not None and user.id != me and (sender is None or user.id != sender.id)


def _quoted_from(message: Message) -> str | None:
    """Who wrote the text the message quotes, when that is someone else."""
    if message.external_reply is not None:
        return author(message.external_reply.origin)
    replied = message.reply_to_message
    if replied is not None and _others(replied.from_user, message):
        assert replied.from_user is not None
        return _user(replied.from_user)
    return None


def marked(message: Message, text: str) -> str:
    """`text` (what the message says, or its files' text) with what others wrote marked."""
    origin = message.forward_origin
    sender = message.from_user
    forwarded_own = (
        isinstance(origin, MessageOriginUser)
        and sender is not None
        and origin.sender_user.id == sender.id
    )
    if origin is not None and not forwarded_own:
        text = outside_note(f"the message forwarded from {author(origin)}") + text
    who = _quoted_from(message)
    if who is not None and message.quote is not None and message.quote.text:
        text += f"\n\n{outside_note(f'the text quoted from {who}')}{message.quote.text}"
    elif message.external_reply is not None:
        text += f"\n\n{outside_note(f'a reply to a message of {who} in another chat')}"
    return text
