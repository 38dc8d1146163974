"""What stands in front of aiogram's webhook handler: a deadline for the whole request, and
a malformed update skipped without its contents in the log.

aiogram reads the body inside its handler and validates the update in a background task:
a body dripped byte by byte would hold the handler, and an update that does not validate
would end as an unretrieved task exception whose log line carries the raw update (users'
texts). Here the body is read under a deadline and validated first; a malformed update is
answered 200 (Telegram would otherwise resend it) and logged by field only."""

from __future__ import annotations

import asyncio
import hmac
import logging
from typing import Any

from aiogram.types import Update
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware
from pydantic import ValidationError

from bot.telegram.session import json_loads

log = logging.getLogger(__name__)

READ_S = 30.0  # a request's body must have arrived by then
SECRET_HEADER = "X-Telegram-Bot-Api-Secret-Token"


def guards(secret: str) -> list[Middleware]:
    @web.middleware
    async def guard(request: web.Request, handler: Handler) -> web.StreamResponse:
        try:
            async with asyncio.timeout(READ_S):
                body = await request.read()  # kept by aiohttp: the handler reads it again
        except TimeoutError:
            log.warning("webhook: a request did not arrive within %.0f s; dropped", READ_S)
            raise web.HTTPRequestTimeout() from None
        given = request.headers.get(SECRET_HEADER, "")
        if body and hmac.compare_digest(given.encode(), secret.encode()):
            problem = _malformed(body)
            if problem is not None:
                log.warning("webhook: skipped a malformed update: %s", problem)
                return web.json_response({})
        return await handler(request)

    return [guard]


def _malformed(body: bytes) -> str | None:
    # Parsed as aiogram's handler will (the session's loader: a lone surrogate escape is
    # replaced, where pydantic's own JSON parser would refuse the whole update).
    try:
        data: Any = json_loads(body)
    except ValueError as exc:
        return f"not JSON ({type(exc).__name__})"
    try:
        Update.model_validate(data)
    except ValidationError as exc:
        where = sorted({".".join(map(str, e["loc"])) for e in exc.errors()})[:5]
        update_id = data.get("update_id") if isinstance(data, dict) else None
        return f"update_id {update_id}, {exc.error_count()} field(s) failed: {', '.join(where)}"
    return None
