"""The runtime's record of a request: every answer, tool call and result, written by the
runtime (never by the model). One transaction per tool round: the assistant's message with
its calls, each result as a history message, and each call in the audit table."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from bot.agent.hooks import AgentHooks, ToolRound
from bot.agent.toolexec import AUDIT_LIMIT
from db.engine import SessionFactory, engine_of
from db.repos import core as repo
from db.repos import last_writes
from db.repos import usage as usage_repo
from tools.base import Clock, RequestContext

# Other writes that belong in the same transaction (a model call's usage row).
InRecord = Callable[[AsyncSession, RequestContext], Awaitable[None]]


@dataclass
class Recording(AgentHooks):
    session_factory: SessionFactory
    clock: Clock
    also: InRecord | None = None

    async def on_tool_round(self, round_: ToolRound) -> None:
        ctx, now = round_.ctx, self.clock()
        async with self.session_factory() as s, s.begin():
            await repo.add_message(
                s,
                session_id=ctx.session_id,
                user_id=ctx.user_id,
                role="assistant",
                content=round_.content or "",
                request_id=ctx.request_id,
                now=now,
                tool_calls=json.dumps(round_.wire_calls),
            )
            for c, out in zip(round_.calls, round_.outcomes, strict=True):
                await repo.add_message(
                    s,
                    session_id=ctx.session_id,
                    user_id=ctx.user_id,
                    role="tool",
                    content=out.text,
                    request_id=ctx.request_id,
                    now=now,
                    tool_call_id=c.id,
                    tool_name=c.name,
                )
                await repo.add_tool_call(
                    s,
                    request_id=ctx.request_id,
                    session_id=ctx.session_id,
                    user_id=ctx.user_id,
                    tool_call_id=c.id,
                    tool=c.name,
                    arguments=c.arguments[:AUDIT_LIMIT],
                    result=out.text[:AUDIT_LIMIT],
                    ok=out.ok,
                    error=out.error,
                    duration_ms=out.duration_ms,
                    now=now,
                )
            if self.also is not None:
                await self.also(s, ctx)

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        message: repo.MessageFields = {
            "session_id": ctx.session_id,
            "user_id": ctx.user_id,
            "role": "assistant",
            "content": answer,
            "request_id": ctx.request_id,
            "now": self.clock(),
        }
        if self.also is None:
            # Nothing for the ORM to do: a bare connection, lighter than a session.
            async with engine_of(self.session_factory).connect() as conn:
                await last_writes.add_message_commit(conn, **message)
                await conn.commit()  # PostgreSQL's; on SQLite the trip above committed
            return
        async with self.session_factory() as s, s.begin():
            # The usage rows go with the answer, in its trip on SQLite; a failure there
            # rolls both back, as when they were separate statements of this transaction.
            usage_rows = usage_repo.defer_rows(s)
            try:
                await self.also(s, ctx)
            finally:
                usage_repo.stop_deferring(s)
            # Last, so that on SQLite the INSERTs and the COMMIT are one trip.
            await last_writes.add_message_commit(s, usage_rows=usage_rows, **message)
