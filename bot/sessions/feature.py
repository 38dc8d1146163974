"""Sessions: the conversation split into periods (SESSION_SPLIT, in each user's time zone),
each ended session archived into memory (bot/sessions/archive.py), a long session's oldest
turns compressed (bot/sessions/history.py), /newsession, /sessions and /timezone, and the
per-minute split job (bot/sessions/split.py)."""

from __future__ import annotations

from typing import Any

from bot.sessions import commands
from bot.sessions.background import BackgroundArchive
from bot.sessions.doctor import session_checks, summaries_check
from bot.sessions.models import SessionArchive, SessionCompression
from bot.sessions.settings import SessionSettings
from bot.sessions.split import EVERY, SessionSplit
from tools.base import CheckResult
from tools.feature import Command, Feature, Host, Job


def split(host: Host) -> SessionSplit:
    deps = host.deps
    settings = deps.settings_for(SessionSettings)
    # The archiver /newsession uses too (its summary model and budget); None without memory.
    archiver = host.part(BackgroundArchive).archiver
    return SessionSplit(settings, deps.session_factory, archiver, deps.clock)


async def split_due(host: Host) -> Any:
    # The terminal chat serves its local user only and leaves the split to the bot, as the
    # split archives every user's sessions (a model call each); the terminal's own session
    # still closes on its first message after the split time (db/conversation.py).
    if host.local:
        return None
    return await host.part(SessionSplit).split_sessions()


async def check(host: Host) -> list[CheckResult]:
    deps = host.deps
    settings = deps.settings_for(SessionSettings)
    return [
        *await session_checks(settings, deps.session_factory, deps.clock()),
        *await summaries_check(deps.session_factory),
    ]


FEATURE = Feature(
    name="sessions",
    settings=SessionSettings,
    models=(SessionArchive, SessionCompression),
    commands=(
        Command(
            "newsession",
            "end this conversation and start a new one",
            commands.newsession,
            aliases=("new",),
            args="[name]",
        ),
        Command("sessions", "your recent sessions with their summaries", commands.sessions),
        Command("timezone", "show or set your time zone", commands.timezone, args="[Area/City]"),
    ),
    jobs=(
        Job(
            "session-split",
            "archive sessions whose period ended, and pending summaries",
            EVERY,
            split_due,
        ),
    ),
    parts=(split,),
    doctor=check,
)
