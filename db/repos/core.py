"""Users, sessions and a session's messages, for commands, jobs and features (a turn's own
reads and writes are db/conversation.py's)."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import (
    BindParameter,
    ColumnElement,
    Select,
    bindparam,
    select,
)
from sqlalchemy.ext.asyncio import AsyncSession

from db.models.core import ChatSession, Message, User


@dataclass(frozen=True)
class Recipient:
    """Who a message the user did not just ask for goes to (a reminder, a notice)."""

    user_id: int
    telegram_id: int | None
    name: str = ""
    # A group it goes to instead of the person's private chat: a group they asked in
    # (a check-in there); its request is then held in that group, as their message there is.
    chat_id: int | None = None


async def get_or_create_user(
    s: AsyncSession, telegram_id: int | None, name: str, now: datetime
) -> User:
    """The user with this Telegram id (or the single local user when None); name refreshed."""
    if telegram_id is None:
        stmt = select(User).where(User.telegram_id.is_(None)).order_by(User.id).limit(1)
    else:
        stmt = select(User).where(User.telegram_id == telegram_id)
    user = (await s.execute(stmt)).scalar_one_or_none()
    if user is None:
        user = User(telegram_id=telegram_id, name=name, created_at=now)
        s.add(user)
        await s.flush()
    elif name and user.name != name:
        user.name = name
    return user


def in_chat(chat: int | BindParameter[Any] | None) -> ColumnElement[bool]:
    """The sessions of this chat (db/conversation.py chat_scope); a bound value may be either."""
    if isinstance(chat, BindParameter):
        return ChatSession.chat_id.is_not_distinct_from(chat)
    return ChatSession.chat_id.is_(None) if chat is None else ChatSession.chat_id == chat


def with_open_session(
    who: ColumnElement[bool], *columns: Any, chat: ColumnElement[bool] | None = None
) -> Select[Any]:
    open_one = (ChatSession.user_id == User.id) & ChatSession.ended_at.is_(None)
    return (
        select(*columns)
        .outerjoin(ChatSession, open_one & (in_chat(None) if chat is None else chat))
        .where(who)
        .order_by(User.id, ChatSession.id.desc())
        .limit(1)
    )


_USER_WITH_OPEN_SESSION = with_open_session(
    User.telegram_id == bindparam("telegram_id"), User, ChatSession
)
_LOCAL_USER_WITH_OPEN_SESSION = with_open_session(User.telegram_id.is_(None), User, ChatSession)


async def user_with_open_session(
    s: AsyncSession, telegram_id: int | None
) -> tuple[User | None, ChatSession | None]:
    """The user with this Telegram id (the local user when None) and their open session,
    in one round trip; (None, None) when there is no such user yet."""
    if telegram_id is None:
        result = await s.execute(_LOCAL_USER_WITH_OPEN_SESSION)
    else:
        result = await s.execute(_USER_WITH_OPEN_SESSION, {"telegram_id": telegram_id})
    row = result.first()
    return (row[0], row[1]) if row else (None, None)


async def get_user(s: AsyncSession, user_id: int) -> User | None:
    return await s.get(User, user_id)


async def current_session(
    s: AsyncSession, user_id: int, chat: int | None = None
) -> ChatSession | None:
    """The user's open session in `chat` (chat_scope; None: their own chat)."""
    stmt = (
        select(ChatSession)
        .where(ChatSession.user_id == user_id, ChatSession.ended_at.is_(None), in_chat(chat))
        .order_by(ChatSession.id.desc())
        .limit(1)
    )
    return (await s.execute(stmt)).scalar_one_or_none()


def default_session_name(now: datetime) -> str:
    return now.strftime("%Y-%m-%d %H:%M")


async def create_session(
    s: AsyncSession, user_id: int, name: str | None, now: datetime, chat: int | None = None
) -> ChatSession:
    session = ChatSession(
        user_id=user_id, name=name or default_session_name(now), started_at=now, chat_id=chat
    )
    s.add(session)
    await s.flush()
    return session


async def session_messages(
    s: AsyncSession, session_id: int, limit: int | None = None
) -> list[Message]:
    """The session's messages in order; with `limit`, only the newest `limit` of them."""
    stmt = select(Message).where(Message.session_id == session_id).order_by(Message.id.desc())
    if limit is not None:
        stmt = stmt.limit(limit)
    rows = list((await s.execute(stmt)).scalars())
    rows.reverse()
    return rows
