"""Replies to the commands both adapters answer (bot/commands.py), as plain text: Telegram's
routers send them, the terminal prints them. No aiogram here: the terminal does not load it."""

from __future__ import annotations

from zoneinfo import ZoneInfo

from bot.app import App
from bot.usage.report import last_request_line, session_text, usage_text
from bot.usage.request import allowed_models
from db.repos import core as core_repo
from db.repos import usage as usage_repo
from tools.discovery.report import context_text
from tools.registry import discovery

USAGE = "Usage: /usage, /usage session, /usage footer on|off"
RESET_WORDS = {"default", "reset"}


async def usage_command(app: App, user_id: int, args: str) -> str:
    meter = app.agent.meter
    if meter is None:
        return "Usage recording is off."
    words = args.lower().split()
    if not words:
        return await usage_text(meter, user_id)
    if words == ["session"]:
        return await session_text(meter, user_id)
    if len(words) == 2 and words[0] == "footer" and words[1] in ("on", "off"):
        async with app.session_factory() as s, s.begin():
            await usage_repo.set_footer(s, user_id, words[1] == "on")
        if words[1] == "on":
            return "From now on each answer ends with its tokens and cost."
        return "The usage footer is off."
    return USAGE


async def context_command(app: App, user_id: int, tz: ZoneInfo) -> str:
    disc = discovery(app.registry)
    if disc is None:
        return "Context accounting is off."
    text = context_text(disc, user_id, tz)
    if app.agent.meter is not None:  # the same line /usage shows: they must agree
        last = await last_request_line(app.agent.meter, user_id)
        text += f"\n{last}" if last else ""
    return text


async def model_reply(app: App, telegram_user_id: int | None, name: str, args: str) -> str:
    s = app.settings
    models = allowed_models(s.llm_model, s.llm_models)
    wanted = args.strip()
    async with app.session_factory() as db, db.begin():
        user = await core_repo.get_or_create_user(db, telegram_user_id, name, app.deps.clock())
        current = user.llm_model if user.llm_model in models else s.llm_model
        if not wanted:
            lines = [f"Your model: {current}"]
            for m in models:
                mark = "• " if m != current else "→ "
                lines.append(mark + m + (" (default)" if m == s.llm_model else ""))
            if len(models) > 1:
                lines.append("Switch with /model <name>; /model default goes back.")
            else:
                lines.append("Only one model is configured (the owner can add more: LLM_MODELS).")
            return "\n".join(lines)
        if wanted.lower() in RESET_WORDS:
            await usage_repo.set_model(db, user.id, None)
            return f"Back to the default model: {s.llm_model}."
        match = next((m for m in models if m.lower() == wanted.lower()), None)
        if match is None:
            return f"I don't know the model {wanted!r}. Pick one of: {', '.join(models)}."
        await usage_repo.set_model(db, user.id, None if match == s.llm_model else match)
        return f"Your model is now {match}."
