"""A client of the dashboard of a running `tg` (tests/e2e/conftest.py): sign in the way a
person does (/dashboard in the fake Telegram, the link's page, its button), then pages and
forms with the session's CSRF token. Shared by the assembled-app tests and the browser tier."""

from __future__ import annotations

import hashlib
import hmac
import re
from dataclasses import dataclass, field
from urllib.parse import urlencode

import httpx
from sqlalchemy import select

from bot.dashboard.part import DASHBOARD
from bot.dashboard.server import COOKIE
from db.models.core import User
from tests.e2e.conftest import TG

LINK = re.compile(r"(http://\S+/login\?t=\S+)")
CSRF = re.compile(r'name="csrf" value="([^"]+)"')


def sign_init_data(fields: dict[str, str], bot_token: str) -> str:
    """initData as Telegram signs it for a Mini App (the key: HMAC-SHA256 of the bot token
    under "WebAppData"), written out here apart from the code that checks it."""
    check = "\n".join(f"{k}={v}" for k, v in sorted(fields.items()))
    secret = hmac.new(b"WebAppData", bot_token.encode(), hashlib.sha256).digest()
    signed = hmac.new(secret, check.encode(), hashlib.sha256).hexdigest()
    return urlencode({**fields, "hash": signed})


def dashboard_url(tg: TG) -> str:
    return tg.app.part(DASHBOARD).url


async def link_for(tg: TG, telegram_id: int) -> str:
    await tg.send(telegram_id, "/dashboard")
    text = (await tg.reply(telegram_id)).text
    found = LINK.search(text)
    assert found, text
    return found.group(1)


async def user_id(tg: TG, telegram_id: int) -> int:
    async with tg.app.session_factory() as s:
        found = await s.scalar(select(User.id).where(User.telegram_id == telegram_id))
    assert found is not None, f"{telegram_id} never talked to the bot"
    return found


def csrf_in(page: str) -> str:
    found = CSRF.search(page)
    assert found, "the page has no form with a CSRF token"
    return found.group(1)


@dataclass
class Board:
    tg: TG
    http: httpx.AsyncClient
    csrf: str = ""
    pages: list[str] = field(default_factory=list)

    @classmethod
    def open(cls, tg: TG) -> Board:
        return cls(tg, httpx.AsyncClient(base_url=dashboard_url(tg), timeout=60))

    async def close(self) -> None:
        await self.http.aclose()

    async def sign_in(self, telegram_id: int) -> httpx.Response:
        link = await link_for(self.tg, telegram_id)
        token = link.split("t=", 1)[1]
        shown = await self.http.get(f"/login?t={token}")
        assert shown.status_code == 200 and 'action="/login"' in shown.text
        done = await self.http.post("/login", data={"t": token})
        assert done.status_code == 303, done.text
        today = await self.get("/")
        assert today.status_code == 200, today.text
        return done

    async def get(self, path: str) -> httpx.Response:
        response = await self.http.get(path)
        if response.status_code == 200 and 'name="csrf"' in response.text:
            self.csrf = csrf_in(response.text)
        return response

    async def post(self, path: str, data: dict[str, str] | None = None) -> httpx.Response:
        return await self.http.post(path, data={"csrf": self.csrf, **(data or {})})

    @property
    def signed_in(self) -> bool:
        return COOKIE in self.http.cookies
