"""Sign-in without passwords (a one-time link from /dashboard, or a Mini App's initData);
either opens a session cookie. Tokens are kept as digests; a session's CSRF token derives
from its secret, so no other site can compute it."""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qsl

from sqlalchemy.ext.asyncio import AsyncSession

from bot.dashboard import repo
from bot.dashboard.repo import Person
from db.engine import SessionFactory

LINK_TTL = timedelta(minutes=10)
SESSION_TTL = timedelta(days=7)
# Telegram signs initData when the Mini App opens; an older one is a replay.
INIT_DATA_MAX_AGE = timedelta(hours=1)
INIT_DATA_MAX_CHARS = 8192
TOKEN_MAX_CHARS = 128


def new_token() -> str:
    return secrets.token_urlsafe(32)


def digest(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


def csrf_of(session_token: str) -> str:
    return hmac.new(session_token.encode(), b"dashboard csrf", hashlib.sha256).hexdigest()[:40]


def same(a: str, b: str) -> bool:
    return hmac.compare_digest(a.encode(), b.encode())


class InitDataError(ValueError):
    """Why a Mini App's initData is refused (shown to the person, names no secret)."""


def init_data_user(init_data: str, bot_token: str, now: datetime) -> int:
    """The Telegram user id a Mini App's initData vouches for, checked as
    core.telegram.org/bots/webapps#validating-data-received-via-the-mini-app says."""
    if not init_data or len(init_data) > INIT_DATA_MAX_CHARS:
        raise InitDataError("no Mini App data, or too much of it")
    try:
        pairs = parse_qsl(init_data, strict_parsing=True, max_num_fields=64)
    except ValueError:
        raise InitDataError("the Mini App data is malformed") from None
    fields = dict(pairs)
    if len(fields) != len(pairs):
        raise InitDataError("the Mini App data repeats a field")
    given = fields.pop("hash", "")
    check = "\n".join(f"{k}={v}" for k, v in sorted(fields.items()))
    secret = hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()
    expected = hmac.new(secret, check.encode(), hashlib.sha256).hexdigest()
    if not given or not same(given, expected):
        raise InitDataError("the Mini App data is not signed by this bot")
    try:
        signed = datetime.fromtimestamp(int(fields["auth_date"]), UTC)
        user = json.loads(fields["user"])
        user_id = user["id"] if isinstance(user, dict) else None
    except (KeyError, ValueError, OverflowError, OSError):
        raise InitDataError("the Mini App data lacks its date or user") from None
    if not isinstance(user_id, int) or isinstance(user_id, bool):
        raise InitDataError("the Mini App data lacks its user")
    if now - signed > INIT_DATA_MAX_AGE or signed - now > timedelta(minutes=5):
        raise InitDataError("the Mini App data is stale: open the dashboard again")
    return user_id


class Tokens:
    # In the database: any worker may answer /dashboard.

    def __init__(self, sf: SessionFactory, clock: Callable[[], datetime]) -> None:
        self._sf = sf
        self._clock = clock

    async def link(self, user_id: int) -> str:
        token, now = new_token(), self._clock()
        async with self._sf() as s, s.begin():
            await repo.drop_expired(s, now)
            await repo.add(s, user_id, "link", digest(token), now, now + LINK_TTL)
        return token

    async def open_link(self, token: str) -> str | None:
        if not token or len(token) > TOKEN_MAX_CHARS:
            return None
        now = self._clock()
        async with self._sf() as s, s.begin():
            user_id = await repo.use_link(s, digest(token), now)
            if user_id is None:
                return None
            return await self._open(s, user_id, now)

    async def open_for(self, user_id: int) -> str:
        async with self._sf() as s, s.begin():
            return await self._open(s, user_id, self._clock())

    async def _open(self, s: AsyncSession, user_id: int, now: datetime) -> str:
        session = new_token()
        await repo.add(s, user_id, "session", digest(session), now, now + SESSION_TTL)
        return session

    async def person(self, session: str) -> Person | None:
        if not session or len(session) > TOKEN_MAX_CHARS:
            return None
        async with self._sf() as s:
            return await repo.session_user(s, digest(session), self._clock())

    async def person_of(self, telegram_id: int) -> Person | None:
        async with self._sf() as s:
            return await repo.by_telegram_id(s, telegram_id)

    async def sign_out(self, session: str) -> None:
        async with self._sf() as s, s.begin():
            await repo.drop(s, digest(session))

    async def sign_out_everywhere(self, user_id: int) -> None:
        async with self._sf() as s, s.begin():
            await repo.drop_user(s, user_id)
