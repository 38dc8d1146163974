"""Archiving a session: summarise it with the model, keep the summary as a `short` memory,
drop the session's `session`-layer memories, and mark it ended and archived.

Every step is idempotent and its result is saved before the next one starts, so a run
that fails half-way (model down, process killed) is simply repeated later and still
yields exactly one summary memory:

1. the checked summary is saved on the session's archive row (a retry reuses it);
2. the memory is stored and its id saved (the memory store's de-duplication turns a
   repeat of the same text into an update, should the process die in between);
3. session memories are cleared; 4. the session is marked ended and archived.

When the model fails, nothing is marked: a scheduled split leaves the session open and
the next run retries (with backoff). A session closed on request (/newsession) stays
closed and only its summary is retried.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Literal, Protocol
from zoneinfo import ZoneInfo

from bot.agent.archive_check import MAX_CHARS, check_summary, describe, language_of
from bot.agent.consolidate import PROMPT as FACTS_PROMPT
from bot.agent.consolidate import Fact, FactWriter, consolidate, split
from bot.agent.grounding import check
from db.engine import SessionFactory
from db.models.core import Message
from db.repos import core as core_repo
from db.repos import sessions as repo
from scheduler.jobs import SessionJobs, Sweeper
from scheduler.periods import user_tz
from scheduler.settings import SessionSettings
from tools.base import Clock, TextModel, ToolDeps
from tools.model_call import ModelCall

log = logging.getLogger(__name__)

Status = Literal["archived", "already", "empty", "failed", "grew", "missing"]

MAX_MESSAGE_CHARS = 2000
MAX_TRANSCRIPT_CHARS = 24000
HEAD_CHARS = 4000
SUMMARY_MAX_TOKENS = 600
SUMMARY_CATEGORY = "session"
BACKOFF_CAP = timedelta(hours=1)
DEFAULT_NAME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")  # db.repos.core.default_session_name

PROMPT = (
    """You write the memory of a finished conversation between a user and their \
assistant, Sidekick, so that Sidekick can recall it in later conversations.
Write 2 to 6 plain sentences (at most 150 words): what the user wanted, what was decided \
or found out, what the user shared about themselves, and what is still open.
Write in {language}. No preamble, no headings, no Markdown."""
    + FACTS_PROMPT
)


class MemoryWriter(FactWriter, Protocol):
    """The part of the memory store archiving uses."""

    async def clear_session(self, *, user_id: int, session_id: int) -> Any: ...


@dataclass
class ArchiveResult:
    session_id: int
    status: Status
    summary: str | None = None
    error: str | None = None

    @property
    def done(self) -> bool:
        return self.status in ("archived", "already", "empty")


class SummaryError(Exception):
    """The model failed or its summary did not pass the checks."""


def transcript(messages: list[Message]) -> str:
    """User and assistant text, oldest first; the middle is cut when it is very long."""
    lines = []
    for m in messages:
        if m.role not in ("user", "assistant") or not (m.content or "").strip():
            continue
        who = "User" if m.role == "user" else "Sidekick"
        text = m.content.strip()
        if len(text) > MAX_MESSAGE_CHARS:
            text = text[:MAX_MESSAGE_CHARS] + " […]"
        lines.append(f"{who}: {text}")
    full = "\n\n".join(lines)
    if len(full) <= MAX_TRANSCRIPT_CHARS:
        return full
    tail = MAX_TRANSCRIPT_CHARS - HEAD_CHARS
    return full[:HEAD_CHARS] + "\n\n[… part of the conversation omitted …]\n\n" + full[-tail:]


class Archiver:
    def __init__(
        self,
        session_factory: SessionFactory,
        memory: MemoryWriter,
        llm: TextModel,
        clock: Clock,
        *,
        default_tz: ZoneInfo | None = None,
        retry_base: timedelta = timedelta(minutes=1),
    ) -> None:
        self.default_tz = default_tz or ZoneInfo("UTC")
        self.session_factory = session_factory
        self.memory = memory
        self.llm = llm
        self.clock = clock
        self.retry_base = retry_base

    async def archive(self, session_id: int) -> ArchiveResult:
        """Archive one session (open or already closed); safe to call any number of times."""
        async with self.session_factory() as s:
            session = await repo.get_session(s, session_id)
            if session is None:
                return ArchiveResult(session_id, "missing")
            state = await repo.archive_row(s, session_id)
            await s.commit()
            if state.archived_at is not None:
                return ArchiveResult(session_id, "already", state.summary)
            user = await core_repo.get_user(s, session.user_id)
            tz = user_tz(user.timezone if user else None, self.default_tz)
            user_id, name, started = session.user_id, session.name, session.started_at
            messages = await core_repo.session_messages(s, session_id)
            summary = state.summary
            memory_id = state.memory_id
        last_id = messages[-1].id if messages else 0
        said = "\n".join(m.content for m in messages if m.role == "user" and m.content.strip())
        if not said:
            try:
                await self._finish(user_id, session_id)
            except Exception as exc:
                log.exception("closing empty session %d failed", session_id)
                return await self._failed(session_id, f"memory store failed: {type(exc).__name__}")
            log.info("session %d had no user messages: closed without a summary", session_id)
            return ArchiveResult(session_id, "empty")

        if summary is None:
            try:
                summary, facts = await self.summarise(
                    messages, said, ModelCall("archive", user_id, session_id)
                )
            except SummaryError as exc:
                return await self._failed(session_id, str(exc))
            try:
                names = language_of(said) != "German"
                await consolidate(self.memory, user_id, messages, facts, names=names)
            except Exception:
                log.exception("keeping the facts of session %d failed", session_id)
            async with self.session_factory() as s, s.begin():
                grew = await self._grew(s, session_id, last_id)
                if grew:
                    # A message came in while the model wrote: summarise again next run
                    # rather than keep a summary that misses it.
                    log.info("session %d grew while being summarised; retrying later", session_id)
                    return ArchiveResult(session_id, "grew")
                summary = await repo.save_summary(s, session_id, summary)

        try:
            if memory_id is None:
                when = started.astimezone(tz).strftime("%Y-%m-%d")
                named = name and not DEFAULT_NAME.fullmatch(name)  # not just a timestamp
                label = f"{when} ({name})" if named else when
                stored = await self.memory.store(
                    user_id=user_id,
                    layer="short",
                    content=f"{label}: {summary}",
                    category=SUMMARY_CATEGORY,
                    certainty=1.0,
                    session_id=session_id,
                    message_id=last_id or None,
                )
                async with self.session_factory() as s, s.begin():
                    await repo.save_memory_id(s, session_id, stored.id)
            await self._finish(user_id, session_id)
        except Exception as exc:
            log.exception("storing the summary of session %d failed", session_id)
            return await self._failed(session_id, f"memory store failed: {type(exc).__name__}")
        log.info("archived session %d (%d messages) into a short memory", session_id, len(messages))
        return ArchiveResult(session_id, "archived", summary)

    async def _grew(self, s: Any, session_id: int, last_id: int) -> bool:
        session = await repo.get_session(s, session_id)
        if session is None or session.ended_at is not None:
            return False
        rows = await core_repo.session_messages(s, session_id, limit=1)
        return bool(rows) and rows[-1].id != last_id

    async def _finish(self, user_id: int, session_id: int) -> None:
        await self.memory.clear_session(user_id=user_id, session_id=session_id)
        async with self.session_factory() as s, s.begin():
            await repo.mark_archived(s, session_id, self.clock())

    async def _failed(self, session_id: int, error: str) -> ArchiveResult:
        now = self.clock()
        async with self.session_factory() as s, s.begin():
            row = await repo.archive_row(s, session_id)
            wait = min(BACKOFF_CAP, self.retry_base * 2 ** min(row.attempts, 10))
            attempts = await repo.record_failure(s, session_id, error, now + wait)
        log.warning(
            "could not archive session %d (attempt %d, retry after %s): %s",
            session_id,
            attempts,
            wait,
            error,
        )
        return ArchiveResult(session_id, "failed", error=error)

    async def summarise(
        self, messages: list[Message], said: str, call: ModelCall | None = None
    ) -> tuple[str, list[Fact]]:
        """A checked summary and the facts the model listed after it; one corrective
        retry when the summary does not pass."""
        language = describe(language_of(said))
        base = [
            {"role": "system", "content": PROMPT.format(language=language)},
            {"role": "user", "content": "The conversation:\n\n" + transcript(messages)},
        ]
        request = base
        problem = invented = ""
        for _ in range(2):
            try:
                text = await self.llm.complete_text(
                    request, max_tokens=SUMMARY_MAX_TOKENS, call=call
                )
            except Exception as exc:
                raise SummaryError(f"model failed: {type(exc).__name__}: {exc}") from exc
            text, facts = split((text or "").strip())
            problem = check_summary(text, said) or ""
            invented = "" if problem else grounding_problem(text, messages, said)
            problem = problem or invented
            if not problem:
                return text, facts
            request = [
                *base,
                {"role": "assistant", "content": text[: MAX_CHARS * 2]},
                {
                    "role": "user",
                    "content": f"That will not do: {problem}. Write it again, in {language}, "
                    f"at most 150 words.",
                },
            ]
        if not invented:
            raise SummaryError(f"summary rejected: {problem}")
        # The model keeps stating what was not said: keep the user's own words instead of
        # retrying (a memory of invented facts is worse than a plain one).
        log.warning("archive summary rejected twice (%s); keeping the user's words", problem)
        return extractive(messages), []


def grounding_source(messages: list[Message]) -> tuple[str, bool]:
    """What a summary may draw on: the user's and Sidekick's words, the results of tool
    calls that succeeded and the dates the turns were sent; and whether any tool call
    succeeded (failed calls' arguments and errors are not facts about the user)."""
    parts, ok = [], False
    for m in messages:
        if m.role == "tool":
            if m.content.startswith("Error:"):
                continue
            ok = True
        parts.append(f"{m.created_at:%Y-%m-%d} {m.content}")
    return "\n".join(parts), ok


def grounding_problem(summary: str, messages: list[Message], said: str) -> str:
    source, ok = grounding_source(messages)
    names = language_of(said) != "German"  # German capitalises every noun
    result = check(summary, source, tool_succeeded=ok, names=names)
    return "" if result.ok else f"it states what the conversation does not ({result.reason()})"


def extractive(messages: list[Message]) -> str:
    """A summary nothing can be invented in: the user's own first messages, quoted."""
    said = [m.content.strip() for m in messages if m.role == "user" and m.content.strip()]
    quoted = "; ".join(f"“{t[:200]}”" for t in said[:3])
    more = f" (and {len(said) - 3} more messages)" if len(said) > 3 else ""
    return f"The user wrote: {quoted}{more}."[:MAX_CHARS]


def archiver_from(deps: ToolDeps, default_tz: ZoneInfo) -> Archiver | None:
    """The archiver for an app's shared resources; None when memory is not available."""
    if deps.memory is None:
        return None
    return Archiver(deps.session_factory, deps.memory, deps.llm, deps.clock, default_tz=default_tz)


class MemoryStoreLike(MemoryWriter, Sweeper, Protocol):
    """A memory store: writes summaries, clears session memories, sweeps expired ones."""


def build_jobs(
    *,
    settings: SessionSettings,
    session_factory: SessionFactory,
    memory: MemoryStoreLike,
    llm: TextModel,
    clock: Clock,
) -> SessionJobs:
    """The scheduler's session jobs, given the one archiving path the commands use too."""
    archiver = Archiver(session_factory, memory, llm, clock, default_tz=settings.tz)
    return SessionJobs(settings, session_factory, archiver, memory, clock)
