"""/usage (today, this month, by model and purpose, under a chart of the last 14 days),
/usage session, /usage footer on|off; /model (the models you may use, yours, switching);
/context (the token split of your last request). Both adapters render these answers."""

from __future__ import annotations

from datetime import timedelta

from bot.llm.settings import ModelSettings
from bot.usage import repo
from bot.usage.meter import CONTEXT_LOG, METER, Meter
from bot.usage.report import context_text, last_request_line, session_text, usage_text
from db.repos import core as core_repo
from tools.charts import chart, usage_series
from tools.feature import Answer, CommandCall, Host

CHART_DAYS = 14
USAGE = "Usage: /usage, /usage session, /usage footer on|off"
RESET_WORDS = {"default", "reset"}


def allowed_models(default: str, configured: tuple[str, ...]) -> list[str]:
    """What /model offers: the default model first, then the others LLM_MODEL names."""
    return list(dict.fromkeys([m for m in (default, *configured) if m]))


def settings(host: Host) -> ModelSettings:
    """LLM_MODEL (the default model and the others): the model's slice of the settings."""
    return host.deps.settings_for(ModelSettings)


def meter_of(host: Host) -> Meter | None:
    """The usage feature's Meter; None: usage is not recorded."""
    return host.maybe(METER)


async def _chart(meter: Meter, user_id: int) -> bytes | None:
    now = meter.clock()
    async with meter.sf() as s:
        rows = await repo.usage_rows(s, user_id, now - timedelta(days=CHART_DAYS))
    return await chart(usage_series(rows, now, meter.tz, CHART_DAYS))


async def usage(call: CommandCall) -> Answer | str:
    meter, user_id = meter_of(call.host), call.who.user_id
    if meter is None:
        return "Usage recording is off."
    words = call.args.lower().split()
    if not words:
        return Answer(await usage_text(meter, user_id), chart=lambda: _chart(meter, user_id))
    if words == ["session"]:
        return await session_text(meter, user_id)
    if len(words) == 2 and words[0] == "footer" and words[1] in ("on", "off"):
        async with call.host.deps.session_factory() as s, s.begin():
            await repo.set_footer(s, user_id, words[1] == "on")
        meter.forget(user_id)
        if words[1] == "on":
            return "From now on each answer ends with its tokens and cost."
        return "The usage footer is off."
    return USAGE


async def context(call: CommandCall) -> str:
    text = context_text(call.host.part(CONTEXT_LOG), call.who.user_id, call.who.tz)
    meter = meter_of(call.host)
    if meter is not None:  # the same line /usage shows: they must agree
        last = await last_request_line(meter, call.who.user_id)
        text += f"\n{last}" if last else ""
    return text


async def model(call: CommandCall) -> str:
    text = await _model(call)
    if (meter := meter_of(call.host)) is not None:
        meter.forget(call.who.user_id)  # once committed: the next request reads the pick
    return text


async def _model(call: CommandCall) -> str:
    s = settings(call.host)
    models = allowed_models(s.llm_model, s.llm_models)
    wanted = call.args.strip()
    async with call.host.deps.session_factory() as db, db.begin():
        user = await core_repo.get_user(db, call.who.user_id)
        mine = user.llm_model if user is not None else None
        current = mine if mine in models else s.llm_model
        if not wanted:
            lines = [f"Your model: {current}"]
            for m in models:
                mark = "• " if m != current else "→ "
                lines.append(mark + m + (" (default)" if m == s.llm_model else ""))
            if len(models) > 1:
                lines.append("Switch with /model <name>; /model default goes back.")
            else:
                lines.append("Only one model is configured (the owner can list more in LLM_MODEL).")
            return "\n".join(lines)
        if wanted.lower() in RESET_WORDS:
            await repo.set_model(db, call.who.user_id, None)
            return f"Back to the default model: {s.llm_model}."
        match = next((m for m in models if m.lower() == wanted.lower()), None)
        if match is None:
            return f"I don't know the model {wanted!r}. Pick one of: {', '.join(models)}."
        await repo.set_model(db, call.who.user_id, None if match == s.llm_model else match)
        return f"Your model is now {match}."
