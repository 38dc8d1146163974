"""The history a prompt shows: the session's turns within the token budget, a long
session's oldest turns replaced by a verified summary.

Most requests fit in the rows read with the user's message (db/conversation.py's
HISTORY_ROWS: HistoryWindow's fast path, where a stored message is converted to its wire
form and counted once per process, as it never changes; a longer session's window is kept
from its previous message, and checked against the database for a newer summary only once it
no longer fits: Compressor._newest). When the
newest turns no longer fit the budget, the prompt shows the newest that fit (the model is
told which turns it does not see: it never meets a gap without knowing), and once enough
has piled up the oldest uncovered range is summarised by the summary service
(bot/sessions/summary.py; rolling: the previous summary is part of what is summarised;
verified there: the grounding check, then a reviewer call in a fresh context when
SUMMARY_REVIEW=model) and saved; from then on the
model sees "turns i..j (when) are summarised: ..." in front of the first turn shown instead
of those turns (not in the system message: its bytes and the tool schemas stay the same, so
a provider's prefix cache keeps them whatever is cut). The turns stay in the messages table
and /sessions. A rejected summary is saved as rejected (doctor counts them).

No turn waits for a summary (issue 46: a 4k-context model waited 26-159 s in 7 of 22 turns).
The request that finds one due only marks it (DUE); the sessions' turn hooks start it after
the answer is stored (Compressions, in the background), and the next turn uses it when it is
ready and trims meanwhile. A summary covers at least STEP_TURNS of the person's turns, or
all one summary call can read (the model's whole context, not the history's share of it),
so a small context compresses at most once in ten turns.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from bot.agent.prompt import (
    context_size,
    history_budget,
    message_cost,
    to_openai,
    trim_history,
    with_note,
)
from bot.llm.settings import ModelSettings
from bot.sessions import repo
from bot.sessions.models import SessionCompression
from bot.sessions.summary import (
    DEFAULT_BUDGET,
    SUMMARY_MAX_S,
    SUMMARY_MAX_TOKENS,
    Ask,
    Review,
    Summariser,
    Turn,
    line_cost,
)
from db.conversation import HISTORY_ROWS, HistoryRow
from db.engine import SessionFactory, engine_of
from tools.base import Clock, RequestContext, TextModel
from tools.chat import ChatModel
from tools.model_call import ModelCall
from tools.state import Key, Slot

log = logging.getLogger(__name__)

WIRED_MAX = 10_000  # stored messages kept per process in their wire form, with token counts
# Long sessions whose window (Compressor._newest) is kept per process, to extend with the
# rows each message reads rather than read again.
WINDOWS_MAX = 16
KEEP_FRACTION = 0.5  # of the budget left to recent turns after a compression
# The person's turns a compression covers at least (unless one summary call cannot read
# them all): a small context then compresses at most once in this many turns.
STEP_TURNS = 10
# Meanwhile the oldest turns are left out this many of the person's turns at a time.
TRIM_STEP = 5
# Tokens of a summary call besides the turns it reads: its instruction and the summary it
# continues (at most SUMMARY_MAX_TOKENS of an earlier call's answer).
SUMMARY_PROMPT_RESERVE = 900
RETRY_AFTER_MESSAGES = 20  # a rejected range is tried again only once this much has grown
# Rows of a session read back at a time, newest first, until they pass the budget: one read
# holds what a 6,000-token budget shows of an ordinary chat.
PAGE_ROWS = 256

WRITE = Ask(
    instruction="""You compress the start of a conversation between a user and their \
assistant, Sidekick, so Sidekick can continue it without those turns. Write at most 200 \
words of plain sentences: facts the user stated, decisions, results of tools, open tasks. \
Keep names, numbers, dates and links exactly as written. Say only what the turns say; \
if a tool call failed, say it failed. Write in {language}. No preamble, no Markdown.""",
    lead="The turns:\n\n",
    words=200,
    tools=True,  # the summary stands in for the turns: what tools returned must survive
)


@dataclass
class Fitted:
    """The turns the prompt shows; in front of the first, the note on what an earlier
    summary covers or which turns are not shown (bot/agent/prompt.py with_note). `due`: a
    summary of the oldest uncovered turns is worth writing now."""

    history: list[dict[str, Any]]
    due: bool = False


def summary_chunk(budget: int, context: int | None) -> int:
    """Tokens of turns one summary call reads: what the model's context holds beside the
    summary's instruction and answer when the context is known (a summary call carries no
    tool schemas), else the history's budget."""
    if not context:
        return budget
    room = context - SUMMARY_MAX_TOKENS - SUMMARY_PROMPT_RESERVE
    return max(budget, min(DEFAULT_BUDGET, room))


@dataclass
class Due:
    """A request's word that its session's oldest turns should be summarised (set while
    its history is fitted, acted on after its answer: SessionTurns)."""

    llm: TextModel | None = None
    session_id: int = 0
    user_id: int = 0
    budget: int = 0
    chunk: int = 0


DUE = Slot("sessions.compression_due", Due)


def record_text(row: SessionCompression) -> str:
    when = f"{_at(row.covers_from)} – {_at(row.covers_to)}"
    return (
        f"[compressed] Turns {row.first_turn}–{row.last_turn} of this conversation ({when}) "
        f"are summarised below instead of shown; they are kept in full (/sessions).\n"
        f"{row.summary}"
    )


def _at(t: datetime) -> str:
    return t.strftime("%Y-%m-%d %H:%M")


# How a summary standing in for old turns is verified: the grounding check alone (its
# default, no extra model call), plus a reviewer model call ("model"), or not at all ("off").
# Not a setting: no operator needed it, and a summary that is not checked can lose facts.
SUMMARY_REVIEW: Review = "grounding"


@dataclass(frozen=True)
class Prefetched:
    """The newest history rows of a session, read with the message (at most HISTORY_ROWS:
    fewer is the whole session), as wire messages with their token costs."""

    session_id: int
    rows: Sequence[Shown]
    wire: list[dict[str, Any]]
    costs: list[int]


class Wired:
    """Stored messages in their wire form with their token costs, by id, per process: a
    stored message never changes but the newest user turn, which gets its context block
    kept once it is sent (it is converted again until then). The wire dicts are shared by
    every request that shows the message: nothing changes them (prompt.py makes new ones)."""

    def __init__(self) -> None:
        self._by_id: dict[int, tuple[dict[str, Any], int]] = {}

    def convert(self, rows: Sequence[Shown]) -> tuple[list[dict[str, Any]], list[int]]:
        by_id = self._by_id
        if len(by_id) > WIRED_MAX:
            by_id.clear()
        wire, costs = [], []
        for m in rows:
            got = by_id.get(m.id)
            if got is None:
                w = to_openai(m)
                got = (w, message_cost(w))
                if m.role != "user" or m.context is not None:
                    by_id[m.id] = got
            wire.append(got[0])
            costs.append(got[1])
        return wire, costs


@dataclass
class HistoryWindow:
    session_factory: SessionFactory
    clock: Clock
    _wired: Wired = field(default_factory=Wired, repr=False)
    _windows: dict[int, _Newest] = field(default_factory=dict, repr=False)

    def wire(self, session_id: int, rows: Sequence[HistoryRow]) -> Prefetched:
        """History rows as wire messages with their token costs."""
        return Prefetched(session_id, rows, *self._wired.convert(rows))

    async def fit(
        self,
        ctx: RequestContext,
        settings: ModelSettings,
        llm: ChatModel,
        prefetched: Prefetched | None = None,
    ) -> Fitted:
        """The session's history within the budget (HISTORY_TOKEN_BUDGET, lowered to what the
        model's context leaves), oldest first, with the note on what an earlier summary
        covers or what is not shown in front of the first turn. A summary found due is set
        on the request (DUE) for after its answer, `llm` to write it."""
        context = await context_size(llm)
        budget = history_budget(settings, context)
        got = prefetched if prefetched and prefetched.session_id == ctx.session_id else None
        # The whole session was read with the message and fits: nothing was compressed away.
        if got is not None and len(got.rows) < HISTORY_ROWS and sum(got.costs) <= budget:
            return Fitted(got.wire)
        compressor = Compressor(
            self.session_factory, llm, self.clock, wired=self._wired, windows=self._windows
        )
        chunk = summary_chunk(budget, context)
        fitted = await compressor.fit(ctx.session_id, budget, chunk, got)
        if fitted.due:
            due = ctx.state(DUE)
            due.llm, due.session_id, due.user_id = llm, ctx.session_id, ctx.user_id
            due.budget, due.chunk = budget, chunk
        return fitted


class Compressions:
    """Summaries of long sessions' oldest turns, written in the background after the answer
    that found them due: one at a time per session (its lease keeps other workers out)."""

    def __init__(self, window: HistoryWindow) -> None:
        self.window = window
        self._tasks: dict[int, asyncio.Task[None]] = {}

    def soon(self, due: Due) -> bool:
        """Start the summary `due` asks for; False when one for the session is running."""
        running = self._tasks.get(due.session_id)
        if due.llm is None or (running is not None and not running.done()):
            return False
        w = self.window
        compressor = Compressor(
            w.session_factory, due.llm, w.clock, SUMMARY_REVIEW, w._wired, w._windows
        )

        async def run() -> None:
            try:
                await compressor.compress(due.session_id, due.user_id, due.budget, due.chunk)
            except Exception:
                log.exception("compressing session %d failed; trimming meanwhile", due.session_id)

        task = asyncio.create_task(run(), name=f"compress-session-{due.session_id}")
        self._tasks[due.session_id] = task
        task.add_done_callback(lambda t: self._forget(due.session_id, t))
        return True

    def _forget(self, session_id: int, task: asyncio.Task[None]) -> None:
        if self._tasks.get(session_id) is task:
            del self._tasks[session_id]

    async def idle(self) -> None:
        """Wait for the summaries being written."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks.values()), return_exceptions=True)

    async def stop(self) -> None:
        tasks = list(self._tasks.values())
        for task in tasks:
            task.cancel()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)


COMPRESSIONS: Key[Compressions] = Key("sessions.compressions")


class Shown(Turn, Protocol):
    """A stored turn as a prompt shows it (repo.SHOWN's columns; an ORM Message too)."""

    @property
    def id(self) -> int: ...


def _in_steps(rows: Sequence[Shown], dropped: int, turns_before: int = 0) -> int:
    """How many of the oldest rows to leave out when `dropped` must go: whole steps of
    TRIM_STEP of the person's turns, counted from the first uncovered turn (`turns_before`
    of them lie ahead of `rows`, not read), so that the turns shown start at the same one
    for several messages and a provider's prefix cache keeps reading them (never the newest
    user turn)."""
    starts = [i for i, m in enumerate(rows) if m.role == "user"]
    if not (dropped or turns_before) or not starts:
        return dropped
    gone = turns_before + sum(1 for i in starts if i < dropped)
    step = -(-gone // TRIM_STEP) * TRIM_STEP - turns_before
    return max(dropped, starts[min(step, len(starts) - 1)])


def _worth_a_summary(
    rows: Sequence[Shown], costs: list[int], keep: int, chunk: int, turns_before: int = 0
) -> bool:
    """Whether the uncovered turns older than what `keep` leaves to recent ones are worth a
    summary: at least STEP_TURNS of the person's (`turns_before` of them lie ahead of `rows`,
    not read), or all a summary call of `chunk` tokens reads. Rows not read count by their
    turns only: a range that long is due by them anyway. Their size is summed only when the
    turns leave it to decide (every row's summary line, at every message of a long session,
    otherwise)."""
    older = rows[: Compressor._cut(rows, costs, keep, None)]
    turns = turns_before + sum(1 for m in older if m.role == "user")
    return turns >= STEP_TURNS or sum(line_cost(m, tools=WRITE.tools) for m in older) >= chunk


def _may_retry(grown: int | None) -> bool:
    """A summary may be tried: none was rejected, or the session has grown well since
    (`grown`: repo.since_rejected's count)."""
    return grown is None or grown >= RETRY_AFTER_MESSAGES


@dataclass
class _Newest:
    """What a prompt can show of a session (Compressor._newest): the newest verified
    summary's note and the turn it ends at, what the budget leaves beside it, the newest
    rows read (with their wire form and token costs, oldest first), and the rows and the
    person's turns between the summary and them, counted, not read."""

    note: str
    before: int
    summary_id: int = 0  # the summary's row (0: none), which a kept window must still show
    after: int = 0  # the last message it covers
    room: int = 0
    rows: list[Shown] = field(default_factory=list)
    wire: list[dict[str, Any]] = field(default_factory=list)
    costs: list[int] = field(default_factory=list)
    older: int = 0
    older_turns: int = 0
    whole: bool = False  # every row after the summary is in rows
    # Messages since the session's newest summary was rejected, as read with the message
    # (None: none was, or it was verified): a summary is due again only once it has grown.
    grown: int | None = None

    @classmethod
    def behind(cls, done: SessionCompression | None) -> _Newest:
        """The window in front of which `done` (None: no summary) stands, no rows yet."""
        if done is None:
            return cls("", 0)
        return cls(record_text(done), done.last_turn, done.id, done.last_message_id)

    def leave_room(self, budget: int) -> int:
        """`room`: what `budget` leaves beside the summary's note."""
        self.room = budget - (len(self.note) // 4 + 1)
        return self.room

    def extended(self, read: Prefetched | None) -> _Newest | None:
        """This window (kept from an earlier message of the session) with the rows `read`
        now in place of its newest: None unless `read` starts inside it and holds all of
        its rows from there, unchanged (another worker may have written since, or more than
        `read` holds)."""
        if read is None or not read.rows or not self.rows:
            return None
        first = read.rows[0].id
        at = next((i for i in range(len(self.rows) - 1, -1, -1) if self.rows[i].id <= first), -1)
        tail = [m.id for m in self.rows[at:]] if at >= 0 else []
        if not tail or tail != [m.id for m in read.rows[: len(tail)]]:
            return None
        rows, wire, costs = self.rows[:at], self.wire[:at], self.costs[:at]
        if len(rows) > PAGE_ROWS:  # those shown lie in `read` and the newest rows before it
            gone = len(rows) - PAGE_ROWS
            older = self.older + gone
            older_turns = self.older_turns + sum(1 for m in rows[:gone] if m.role == "user")
            rows, wire, costs = rows[gone:], wire[gone:], costs[gone:]
            whole = False
        else:
            older, older_turns, whole = self.older, self.older_turns, self.whole
        return _Newest(
            self.note, self.before, self.summary_id, self.after, 0,
            [*rows, *read.rows], [*wire, *read.wire], [*costs, *read.costs],
            older, older_turns, whole,
        )  # fmt: skip


class Compressor:
    def __init__(
        self,
        session_factory: SessionFactory,
        llm: TextModel | None,
        clock: Clock,
        review: Review = "grounding",
        wired: Wired | None = None,
        windows: dict[int, _Newest] | None = None,
    ) -> None:
        self.session_factory = session_factory
        self.llm = llm
        self.clock = clock
        self.review = review
        # The HistoryWindow's, shared: stored messages in wire form, and long sessions'
        # windows kept from their last message.
        self.wired = wired if wired is not None else Wired()
        self.windows = windows if windows is not None else {}

    async def _uncovered(
        self, session_id: int
    ) -> tuple[SessionCompression | None, list[Shown], list[dict[str, Any]], list[int]]:
        """The newest verified summary, and the turns after it (rows, wire, costs)."""
        async with self.session_factory() as s:
            done = await repo.latest_verified(s, session_id)
            rows = await repo.messages_after(s, session_id, done.last_message_id if done else 0)
        wire, costs = self.wired.convert(rows)
        return done, list(rows), wire, costs

    async def _newest(self, session_id: int, budget: int, read: Prefetched | None) -> _Newest:
        """The newest verified summary's note, then the newest turns after it (those `read`
        with the message first), read a page at a time until they pass what the budget
        leaves, and how many rows (and of them the person's turns) lie between the two
        unread. However long a session whose summaries keep failing grows, a message reads
        about what it shows; and a message after one this process answered (or after a
        summary it wrote: compress keeps the window that leaves) reads only the newest
        summary's id: the window kept from then is extended by the rows `read`, when they
        prove it still holds (_Newest.extended). Not even that while the extended window
        holds every turn after its summary within the budget: a summary is written only for a
        session found over the budget (Compressor.fit's `due`), so none can have been written
        since, and the prompt shows every turn, as a session read whole with its message does
        (HistoryWindow.fit)."""
        kept = self.windows.pop(session_id, None)
        held = kept.extended(read) if kept else None
        if held is not None and held.whole and sum(held.costs) <= held.leave_room(budget):
            held.older = held.older_turns = 0
            self._keep(session_id, held)
            return held
        # A Core connection, not an ORM session: this runs at every message of a long
        # session, and a session's set-up and tear-down cost more than its statement. The
        # summary's row, read only when no kept window holds, is the one ORM read: a session
        # on the same connection.
        async with engine_of(self.session_factory).connect() as s:
            summary_id, grown = await repo.summaries(s, session_id)
            got = held if held is not None and held.summary_id == summary_id else None
            after = got.after if got else 0
            if got is None:
                got = _Newest.behind(await self._compression(s, summary_id) if summary_id else None)
                after = got.after
                if read is not None:
                    first = next(
                        (i for i, m in enumerate(read.rows) if m.id > after), len(read.rows)
                    )
                    got.rows, got.wire = list(read.rows[first:]), read.wire[first:]
                    got.costs = read.costs[first:]
                    got.whole = first > 0 or len(read.rows) < HISTORY_ROWS
                got.older = -1  # not counted yet
            got.grown = grown
            got.leave_room(budget)
            while not got.whole and sum(got.costs) <= got.room:
                before = got.rows[0].id if got.rows else None
                page = await repo.newest_messages(s, session_id, after, before, PAGE_ROWS)
                wire, costs = self.wired.convert(page)
                got.rows[:0], got.wire[:0], got.costs[:0] = page, wire, costs
                got.whole = len(page) < PAGE_ROWS
                got.older = -1
            if got.whole:
                got.older = got.older_turns = 0
            elif got.older < 0:
                got.older, got.older_turns = await repo.count_messages(
                    s, session_id, after, got.rows[0].id
                )
        self._keep(session_id, got)
        return got

    def _keep(self, session_id: int, window: _Newest) -> None:
        if len(self.windows) >= WINDOWS_MAX:
            del self.windows[next(iter(self.windows))]
        self.windows[session_id] = window

    async def _compression(self, conn: AsyncConnection, id_: int) -> SessionCompression | None:
        async with self.session_factory(bind=conn) as s:
            return await s.get(SessionCompression, id_)

    async def fit(
        self, session_id: int, budget: int, chunk: int, read: Prefetched | None = None
    ) -> Fitted:
        """The session's history within `budget` tokens: the newest summary, then the newest
        turns that fit; `due` when the oldest turns not covered are worth a summary now (at
        least STEP_TURNS of the person's, or all a summary call of `chunk` tokens reads)."""
        got = await self._newest(session_id, budget, read)
        note, before, rows, wire, costs = got.note, got.before, got.rows, got.wire, got.costs
        room, older, older_turns = got.room, got.older, got.older_turns
        if not older and (sum(costs) <= room or not rows):
            return Fitted(with_note(list(wire), note))  # a copy: the window keeps `wire`
        trimmed = len(wire) - len(trim_history(wire, max(room, 1), costs))
        shown_from = _in_steps(rows, trimmed, older_turns)
        kept = wire[shown_from:]
        dropped = older + shown_from
        if dropped:
            gap = (
                f"[not shown] Turns {before + 1}–{before + dropped} of this conversation do "
                f"not fit the context and are left out here; they are kept in full (/sessions)."
            )
            note = f"{note}\n\n{gap}" if note else gap
        keep = int(budget * KEEP_FRACTION)
        due = (
            bool(self.llm)
            and dropped > 0
            and _may_retry(got.grown)
            and _worth_a_summary(rows, costs, keep, chunk, older_turns)
        )
        return Fitted(with_note(kept, note), due)

    async def compress(
        self, session_id: int, user_id: int, budget: int, chunk: int
    ) -> SessionCompression | None:
        """Summarise the oldest turns not covered (as many as one call of `chunk` tokens
        reads, all but the newest that fit half the budget); None when there is nothing to
        do, a rejected range has not grown enough, or another writer holds the session."""
        if self.llm is None:
            return None
        if not await self._worth_trying(session_id):
            return None
        done, rows, wire, costs = await self._uncovered(session_id)
        keep = int(budget * KEEP_FRACTION)
        # Found due by a turn fitted before the previous summary was stored: what is left
        # may be a few turns now.
        if not _worth_a_summary(rows, costs, keep, chunk):
            return None
        cut = self._cut(rows, costs, keep, chunk)
        if cut <= 0:
            return None
        if not await self._claim(session_id):
            return None
        summariser = Summariser(self.llm, self.review, chunk)
        try:
            row = await self._compress(summariser, session_id, user_id, done, rows[:cut])
        except BaseException:  # stored, the row lets go of the lease in its own transaction
            await asyncio.shield(self._release(session_id))
            raise
        if row.verified:
            # What the session's next message shows: the new summary, then every row after
            # what it covers, as read here (the rows written since extend it: _Newest.extended),
            # so that message reads neither the summary back nor its newer rows: a window
            # holding every row after its summary within the budget, as one read whole in
            # _newest. A newer summary is written only once a window no longer fits, and then
            # the window is checked against the database (_newest).
            window = _Newest.behind(row)
            window.rows, window.wire, window.costs = rows[cut:], wire[cut:], costs[cut:]
            window.whole = True
            self._keep(session_id, window)
        return row

    async def _claim(self, session_id: int) -> bool:
        """The session's compression lease: one writer summarises a range at a time (a
        scheduled task and a chat message of one session, two workers); the other trims
        this once and finds the summary next time."""
        now = self.clock()
        until = now + timedelta(seconds=SUMMARY_MAX_S + 60)
        try:
            async with self.session_factory() as s, s.begin():
                await repo.archive_row(s, session_id)
                return await repo.take_lease(s, session_id, "compressing_until", now, until)
        except IntegrityError:  # another writer created the row just now: it is theirs
            return False

    async def _release(self, session_id: int) -> None:
        """The lease let go when no summary was stored (_compress lets go of it with one)."""
        try:
            async with self.session_factory() as s, s.begin():
                await repo.drop_lease(s, session_id, "compressing_until")
        except Exception:  # the lease runs out by itself
            log.warning("releasing session %d's compression lease failed", session_id)

    @staticmethod
    def _cut(rows: Sequence[Shown], costs: list[int], keep: int, chunk: int | None) -> int:
        """How many of the oldest rows to summarise: all but the newest that fit `keep`, and
        no more than the summary service reads in one call, `chunk` tokens by its size rule
        (None: no such limit; after rejected summaries the uncovered range keeps growing;
        the summary call must still fit the model, and what is left goes in the next
        summary), ending just before a user turn (tool results stay with their call)."""
        used = 0
        cut = len(rows)
        for i in range(len(rows) - 1, -1, -1):
            if used + costs[i] > keep:
                break
            used += costs[i]
            cut = i
        if chunk is not None:
            size, limit = 0, 1
            for i in range(cut):
                size += line_cost(rows[i], tools=WRITE.tools)
                if size > chunk:
                    break
                limit = i + 1
            cut = min(cut, limit)
        while cut < len(rows) and rows[cut].role != "user":
            cut += 1
        # The newest user turn and what follows it are never summarised away.
        newest = max((i for i, m in enumerate(rows) if m.role == "user"), default=0)
        return min(cut, newest)

    async def _worth_trying(self, session_id: int) -> bool:
        """Asked again before the range is read (the message that found the summary due read
        the count with its window; another writer may have tried since): after a rejected
        summary, try again only once the session has grown well since (counted in SQL)."""
        async with engine_of(self.session_factory).connect() as c:  # as _newest's
            grown = await repo.since_rejected(c, session_id)
        return _may_retry(grown)

    async def _compress(
        self,
        summariser: Summariser,
        session_id: int,
        user_id: int,
        done: SessionCompression | None,
        rows: Sequence[Shown],
    ) -> SessionCompression:
        first_turn = done.first_turn if done else 1
        start = done.last_turn + 1 if done else 1
        before = f"Summary of turns {first_turn}–{start - 1}:\n{done.summary}\n\n" if done else ""
        call = ModelCall("archive", user_id, session_id)
        summary = await summariser.summarise(WRITE, rows, call, before=before)
        reason = summary.problem
        async with self.session_factory() as s, s.begin():
            row = await repo.add_compression(
                s,
                session_id=session_id,
                first_message_id=done.first_message_id if done else rows[0].id,
                last_message_id=rows[-1].id,
                first_turn=first_turn,
                last_turn=start + len(rows) - 1,
                covers_from=done.covers_from if done else rows[0].created_at,
                covers_to=rows[-1].created_at,
                summary=summary.text,
                verified=reason is None,
                reason=reason,
                now=self.clock(),
            )
            await repo.drop_lease(s, session_id, "compressing_until")
        if reason is None:
            log.info("session %d: turns %d–%d compressed", session_id, first_turn, row.last_turn)
        else:
            log.warning(
                "session %d: summary of turns %d–%d rejected (%s); trimming instead",
                session_id,
                first_turn,
                row.last_turn,
                reason,
            )
        return row


@dataclass
class SessionHistory:
    """The sessions' history window as the loop asks for it (tools/hooks.py History)."""

    window: HistoryWindow
    settings: ModelSettings

    async def fit(
        self, ctx: RequestContext, llm: ChatModel, rows: Sequence[HistoryRow]
    ) -> list[dict[str, Any]]:
        prefetched = self.window.wire(ctx.session_id, rows)
        return (await self.window.fit(ctx, self.settings, llm, prefetched)).history
