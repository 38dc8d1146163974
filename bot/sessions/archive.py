"""Archiving a session: a checked summary (bot/sessions/summary.py) kept as a `short` memory,
the facts the user stated kept as long/mid memories, session memories dropped, the session
marked archived. Each step is saved before the next, so a run cut short (model down, process
killed) is repeated later and still yields one summary memory; a failure retries with backoff.

A fact is kept only when the grounding check finds it in the user's own messages: a memory
of something never said is worse than none. What is summarised leaves out outside content
(web pages, files, MCP answers: tools/effects.py OUTSIDE_MARK) and Sidekick's words after it,
so a page's words never reach memory as the user's (without_outside)."""

from __future__ import annotations

import asyncio
import logging
import re
from collections.abc import Sequence
from dataclasses import KW_ONLY, dataclass, field
from datetime import timedelta
from typing import TYPE_CHECKING, Any, Literal
from zoneinfo import ZoneInfo

from sqlalchemy.exc import IntegrityError

from bot.sessions import repo
from bot.sessions.summary import (
    CHARS_PER_TOKEN,
    DEFAULT_BUDGET,
    SUMMARY_MAX_S,
    Ask,
    Fact,
    Pace,
    Summariser,
    grounding_source,
    said,
)
from db.engine import SessionFactory
from db.models.core import Message
from db.repos import core as core_repo
from tools.base import Clock, TextModel, user_tz
from tools.effects import OUTSIDE_MARK
from tools.grounding import check, checks_names, in_their_words
from tools.model_call import ModelCall

if TYPE_CHECKING:  # the memory feature's part (MEMORY), handed in by the sessions feature
    from tools.memory.store import MemoryStore

log = logging.getLogger(__name__)

# busy: another writer (the split job, /newsession, another worker) holds the session.
Status = Literal["archived", "already", "busy", "empty", "failed", "grew", "missing"]

# What one archive summary reads at most: the summary service's size rule at its default.
MAX_TRANSCRIPT_CHARS = DEFAULT_BUDGET * CHARS_PER_TOKEN
SUMMARY_CATEGORY = "session"
BACKOFF_CAP = timedelta(hours=1)
DEFAULT_NAME = re.compile(r"\d{4}-\d{2}-\d{2} \d{2}:\d{2}")  # db.repos.core.default_session_name
READ = "(Sidekick read outside content here: not shown, and not the user's words.)"

WRITE = Ask(
    instruction="""You write the memory of a finished conversation between a user and their \
assistant, Sidekick, so that Sidekick can recall it in later conversations.
Write 2 to 6 plain sentences (at most 150 words): what the user wanted, what was decided \
or found out, what the user shared about themselves, and what is still open.
Write in {language}. No preamble, no headings, no Markdown.""",
    lead="The conversation:\n\n",
    words=150,
    facts=True,
)

LAYER_OF = {
    "fact": "long",
    "preference": "long",
    "relationship": "long",
    "goal": "mid",
    "plan": "mid",
    "project": "mid",
}
_WORDS = re.compile(r"\w{3,}")


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
    pass


@dataclass
class Archiver:
    session_factory: SessionFactory
    memory: MemoryStore
    llm: TextModel
    clock: Clock
    _: KW_ONLY
    default_tz: ZoneInfo = field(default_factory=lambda: ZoneInfo("UTC"))
    retry_base: timedelta = timedelta(minutes=1)
    # How long a writer may hold a session before another may take over (it died): two
    # summary calls (a rejected summary is asked for once more) at their longest.
    lease: timedelta = timedelta(seconds=2 * SUMMARY_MAX_S + 60)
    pace: Pace = field(default_factory=Pace)  # the server's speed, shared by its calls

    async def archive(self, session_id: int) -> ArchiveResult:
        """Safe to call any number of times, from any process: one writer at a time holds the
        session's lease (the others get "busy")."""
        now = self.clock()
        try:
            async with self.session_factory() as s, s.begin():
                if await repo.get_session(s, session_id) is None:
                    return ArchiveResult(session_id, "missing")
                state = await repo.archive_row(s, session_id)
                if state.archived_at is not None:
                    return ArchiveResult(session_id, "already", state.summary)
                until = now + self.lease
                if not await repo.take_lease(s, session_id, "claimed_until", now, until):
                    return ArchiveResult(session_id, "busy")
        except IntegrityError:  # another writer created the row just now: it is theirs
            return ArchiveResult(session_id, "busy")
        try:
            return await self._archive(session_id)
        finally:
            # Also when cancelled (shutdown): the next writer need not wait for the lease.
            await asyncio.shield(self._release(session_id))

    async def _release(self, session_id: int) -> None:
        try:
            async with self.session_factory() as s, s.begin():
                await repo.drop_lease(s, session_id, "claimed_until")
        except Exception:  # the lease runs out by itself
            log.warning("releasing session %d's summary lease failed", session_id, exc_info=True)

    async def _archive(self, session_id: int) -> ArchiveResult:
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
            summary, memory_id = state.summary, state.memory_id
        last_id = messages[-1].id if messages else 0
        words = said(messages)
        if not words:
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
                    messages, ModelCall("archive", user_id, session_id)
                )
            except SummaryError as exc:
                return await self._failed(session_id, str(exc))
            try:
                names = checks_names(words)
                own = without_outside(messages)
                await consolidate(self.memory, user_id, own, facts, names=names)
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

    async def summarise(self, messages: list[Message], call: ModelCall) -> tuple[str, list[Fact]]:
        messages = without_outside(messages)
        summary = await Summariser(self.llm, pace=self.pace).summarise(WRITE, messages, call)
        if summary.ok:
            return summary.text, summary.facts
        if not summary.invented:
            failed = "" if summary.failed else "summary rejected: "
            raise SummaryError(f"{failed}{summary.problem}")
        # The model keeps stating what was not said: keep the user's own words instead of
        # retrying (a memory of invented facts is worse than a plain one).
        log.warning(
            "archive summary rejected twice (%s); keeping the user's words", summary.problem
        )
        return extractive(messages), []


def extractive(messages: list[Message]) -> str:
    """A summary nothing can be invented in: the user's own first messages, quoted."""
    theirs = [m.content.strip() for m in messages if m.role == "user" and m.content.strip()]
    quoted = "; ".join(f"“{t[:200]}”" for t in theirs[:3])
    more = f" (and {len(theirs) - 3} more messages)" if len(theirs) > 3 else ""
    return f"The user wrote: {quoted}{more}."[: WRITE.max_chars]


def source_message(fact: str, theirs: list[Message]) -> Message | None:
    """The user message sharing the most words with the fact."""
    words = {w.lower() for w in _WORDS.findall(fact)}
    best, score = None, 0
    for m in theirs:
        overlap = len(words & {w.lower() for w in _WORDS.findall(m.content)})
        if overlap > score:
            best, score = m, overlap
    return best


async def consolidate(
    memory: MemoryStore, user_id: int, messages: list[Message], facts: list[Fact], *, names: bool
) -> int:
    """Store the facts grounded in the user's own messages; how many were stored."""
    theirs = [m for m in messages if m.role == "user" and m.content.strip()]
    source = grounding_source(theirs).theirs  # a fact about the user: in the user's own words
    stored = 0
    for fact in facts:
        grounded = check(fact.content, source, names=names)
        origin = source_message(fact.content, theirs)
        own = in_their_words(fact.content, [m.content for m in theirs])
        if not grounded.ok or origin is None or not own:
            why = grounded.reason() or "no user message says it"
            log.info("fact not kept (%s): %.80s", why, fact.content)
            continue
        await memory.store(
            user_id=user_id,
            layer=LAYER_OF[fact.category],
            content=fact.content,
            category=fact.category,
            certainty=0.9,  # the model's reading of the user's words, not the words
            message_id=origin.id,
        )
        stored += 1
    return stored


def _copy(m: Message, content: str, role: str | None = None) -> Message:
    """A detached copy with other content (the stored row stays as it is)."""
    return Message(id=m.id, session_id=m.session_id, user_id=m.user_id, role=role or m.role,
                   content=content, created_at=m.created_at)  # fmt: skip


def without_outside(messages: Sequence[Message]) -> list[Message]:
    """The session as its memory may be written from (this module's docstring says how)."""
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
