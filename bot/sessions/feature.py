"""Sessions: the conversation split into periods (SESSION_SPLIT, in each user's time zone),
ended sessions archived into memory, long sessions' oldest turns summarised, /newsession,
/sessions and /timezone."""

from __future__ import annotations

from typing import Any

from bot.llm.settings import ModelSettings
from bot.sessions.settings import SessionSettings
from tools.feature import Command, Feature, Host, Job, Provide, Setup


def setup() -> Setup:
    from bot.sessions import commands
    from bot.sessions.archive import Archiver
    from bot.sessions.background import ARCHIVE, BackgroundArchive
    from bot.sessions.doctor import session_checks, summaries_check
    from bot.sessions.history import COMPRESSIONS, Compressions, HistoryWindow, SessionHistory
    from bot.sessions.lifecycle import TOOL, AskedToEnd, NewSessionParams, SessionTurns
    from bot.sessions.models import SessionArchive, SessionCompression
    from bot.sessions.split import EVERY, SPLIT, SessionSplit
    from bot.sessions.summary import SUMMARY_MAX_S
    from tools.base import CheckResult
    from tools.hooks import HISTORY, PERIODS, Always, Gate, Only, Periods, RequestHooks
    from tools.memory.store import MEMORY

    async def background(host: Host) -> BackgroundArchive:
        # Summaries have a time budget past LLM_TIMEOUT_S (a slow local server takes
        # minutes): a client of their own whose deadline is the budget's ceiling.
        deps = host.deps
        if not host.has(MEMORY):
            return BackgroundArchive(None)
        store = await host.need(MEMORY)
        model = await host.model_client(SUMMARY_MAX_S)
        return BackgroundArchive(
            Archiver(deps.session_factory, store, model, deps.clock, default_tz=deps.tz)
        )

    async def split(host: Host) -> SessionSplit:
        deps = host.deps
        settings = deps.settings_for(SessionSettings)
        # The archiver /newsession uses (its summary model and budget); None without memory.
        archiver = (await host.need(ARCHIVE)).archiver
        return SessionSplit(settings, deps.session_factory, archiver, deps.clock)

    async def periods(host: Host) -> Periods:
        return Periods(host.deps.settings_for(SessionSettings).session_policy)

    async def compressions(host: Host) -> Compressions:
        deps = host.deps
        return Compressions(HistoryWindow(deps.session_factory, deps.clock))

    async def history(host: Host) -> SessionHistory:
        window = (await host.need(COMPRESSIONS)).window
        return SessionHistory(window, host.deps.settings_for(ModelSettings))

    def closing(host: Host) -> RequestHooks:
        deps = host.deps
        archive, compressed = host.part(ARCHIVE), host.part(COMPRESSIONS)
        return Always(SessionTurns(deps.session_factory, deps.clock, archive, compressed))

    def asked_to_end(host: Host) -> Gate:
        return Only((NewSessionParams,), AskedToEnd(host.deps.session_factory))

    async def split_due(host: Host) -> Any:
        # The terminal chat serves its local user only and leaves the split to the bot, as
        # the split archives every user's sessions (a model call each); the terminal's own
        # session still closes on its first message after the split time
        # (db/conversation.py).
        if host.local:
            return None
        return await host.part(SPLIT).split_sessions()

    async def check(host: Host) -> list[CheckResult]:
        deps = host.deps
        settings = deps.settings_for(SessionSettings)
        return [
            *await session_checks(settings, deps.session_factory, deps.clock()),
            *await summaries_check(deps.session_factory),
        ]

    return Setup(
        models=(SessionArchive, SessionCompression),
        commands=(
            Command(
                "newsession",
                "end this conversation and start a new one",
                commands.newsession,
                aliases=("new",),
                args="[name]",
            ),
            # Its summaries are of the user's private chat too: asked in a group, sent
            # privately.
            Command(
                "sessions",
                "your recent sessions with their summaries",
                commands.sessions,
                private=True,
            ),
            Command(
                "timezone", "show or set your time zone", commands.timezone, args="[Area/City]"
            ),
        ),
        jobs=(
            Job(
                "session-split",
                "archive sessions whose period ended, and pending summaries",
                EVERY,
                split_due,
            ),
        ),
        tools=(TOOL,),
        parts=(
            Provide(ARCHIVE, background, BackgroundArchive.stop),
            Provide(COMPRESSIONS, compressions, Compressions.stop),
            Provide(PERIODS, periods),
            Provide(HISTORY, history),
            Provide(SPLIT, split, on_start=True),
        ),
        gates=(asked_to_end,),
        turns=(closing,),
        doctor=check,
    )


FEATURE = Feature(name="sessions", settings=SessionSettings, setup=setup)
