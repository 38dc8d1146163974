"""/newsession [name] (also /new), /sessions and /timezone [Area/City], for Telegram and the
terminal alike."""

from __future__ import annotations

import difflib
import zoneinfo
from datetime import datetime
from functools import lru_cache
from zoneinfo import ZoneInfo

from bot.sessions import repo
from bot.sessions.background import ARCHIVE
from bot.sessions.lifecycle import NewSession, start_new_session
from bot.sessions.settings import SessionSettings
from db.conversation import chat_scope
from db.repos import core as core_repo
from tools.feature import CommandCall, Host

LIST_LIMIT = 10
SUMMARY_LINE = 140
RESET_WORDS = {"default", "reset"}
MAX_NAME = 100


def _settings(host: Host) -> SessionSettings:
    return host.deps.settings_for(SessionSettings)


async def newsession(call: CommandCall) -> str:
    name = call.args.strip() or None
    if name is not None and len(name) > MAX_NAME:
        return f"Session names are at most {MAX_NAME} characters."
    who = call.who
    chat = chat_scope(who.telegram_id, who.chat_id)
    created = await new_session(call.host, who.telegram_id, who.name, name, chat)
    return new_session_text(created)


async def sessions(call: CommandCall) -> str:
    return await sessions_text(call.host, call.who.telegram_id, call.who.name)


async def timezone(call: CommandCall) -> str:
    return await timezone_text(call.host, call.who.telegram_id, call.who.name, call.args)


async def new_session(
    host: Host,
    telegram_user_id: int | None,
    user_name: str,
    name: str | None,
    chat: int | None = None,
) -> NewSession:
    # The old session is archived in the background: a slow local model takes minutes.
    deps = host.deps
    created = await start_new_session(
        deps.session_factory, deps.clock, telegram_user_id=telegram_user_id,
        user_name=user_name, name=name, chat=chat,
    )  # fmt: skip
    if created.ended_session_id is not None:
        created.in_background = host.part(ARCHIVE).archive_soon(created.ended_session_id)
    return created


def new_session_text(created: NewSession) -> str:
    text = f"Started a new session: {created.name}."
    if created.ended_session_id is None:
        return text
    text += " The previous conversation is closed; I start fresh from here."
    result = created.archive
    if result is not None and result.status == "archived":
        text += " I kept a summary of it in memory."
    elif created.in_background:
        text += " I'm writing its summary to memory in the background."
    elif result is None or result.status in ("failed", "grew", "busy"):
        text += " I'll write its summary to memory shortly (nothing is lost)."
    return text


@lru_cache(maxsize=1)
def _zones() -> dict[str, str]:
    return {z.lower(): z for z in zoneinfo.available_timezones()}


def _fmt(dt: datetime, tz: ZoneInfo) -> str:
    return dt.astimezone(tz).strftime("%Y-%m-%d %H:%M")


def span(start: datetime, end: datetime, tz: ZoneInfo) -> str:
    """`2026-11-28 09:00–17:30` within one local day (the date said once), else both ends
    in full: `2026-11-27 22:00 → 2026-11-28 01:10`."""
    a, b = start.astimezone(tz), end.astimezone(tz)
    if a.date() == b.date():
        return f"{a:%Y-%m-%d %H:%M}–{b:%H:%M}"
    return f"{a:%Y-%m-%d %H:%M} → {b:%Y-%m-%d %H:%M}"


def split_line(settings: SessionSettings, tz: ZoneInfo, now: datetime) -> str:
    policy = settings.session_policy
    nxt = policy.next_split(now, tz)
    if nxt is None:
        return "Sessions are not split by time (SESSION_SPLIT=none)."
    return f"Sessions split {policy.describe()}; next: {_fmt(nxt, tz)}."


async def sessions_text(host: Host, telegram_user_id: int | None, user_name: str) -> str:
    settings, now = _settings(host), host.deps.clock()
    async with host.deps.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, telegram_user_id, user_name, now)
        tz = settings.session_policy.zone(user.timezone)
        lines = await repo.recent_sessions(s, user.id, LIST_LIMIT)
    if not lines:
        return "No sessions yet: just write to me and one starts."
    out = [f"Your recent sessions (times in {tz.key}):"]
    for line in lines:
        start = _fmt(line.started_at, tz)
        if line.ended_at is None:
            when = f"{start} → now (current)"
        else:
            when = span(line.started_at, line.ended_at, tz)
        plural = "" if line.messages == 1 else "s"
        out.append(f"\n• {line.name} — {when} · {line.messages} message{plural}")
        if line.summary:
            first = line.summary.strip().splitlines()[0]
            if len(first) > SUMMARY_LINE:
                first = first[: SUMMARY_LINE - 1].rstrip() + "…"
            out.append(f"  {first}")
        elif line.ended_at is not None and not line.archived:
            out.append("  (summary pending)")
    out.append("\n" + split_line(settings, tz, now))
    return "\n".join(out)


async def timezone_text(host: Host, telegram_user_id: int | None, user_name: str, arg: str) -> str:
    settings, now = _settings(host), host.deps.clock()
    default = settings.timezone
    arg = arg.strip()
    async with host.deps.session_factory() as s, s.begin():
        user = await core_repo.get_or_create_user(s, telegram_user_id, user_name, now)
        if not arg:
            tz = settings.session_policy.zone(user.timezone)
            source = "your own" if user.timezone else "the default (TIMEZONE)"
            return (
                f"Your time zone: {tz.key} ({source}). Local time now: {_fmt(now, tz)}.\n"
                f"{split_line(settings, tz, now)}\n"
                "Change it with /timezone Area/City, e.g. /timezone America/New_York; "
                "/timezone default goes back to the default."
            )
        if arg.lower() in RESET_WORDS:
            await repo.set_user_timezone(s, user.id, None)
            tz = settings.tz
            return (
                f"Time zone reset to the default, {default}. Local time now: {_fmt(now, tz)}.\n"
                f"{split_line(settings, tz, now)}"
            )
        # The IANA name as tzdata spells it ('europe/berlin' → 'Europe/Berlin').
        name = _zones().get(arg.lower())
        if name is None:
            close = difflib.get_close_matches(arg.lower(), list(_zones()), n=3, cutoff=0.6)
            hint = [_zones()[c] for c in close]
            text = f"I don't know the time zone {arg[:60]!r}."
            if hint:
                text += " Did you mean: " + ", ".join(hint) + "?"
            return text + " Use an IANA name like Europe/Berlin or America/New_York."
        await repo.set_user_timezone(s, user.id, name)
    tz = ZoneInfo(name)
    split = split_line(settings, tz, now)
    return f"Time zone set to {name}. Local time now: {_fmt(now, tz)}.\n{split}"
