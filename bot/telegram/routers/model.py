"""/model: the models you may use (LLM_MODEL, LLM_MODELS), yours, and switching."""

from __future__ import annotations

from aiogram import Router
from aiogram.filters import Command, CommandObject
from aiogram.types import Message

from bot.app import App
from bot.telegram.render import send_plain
from bot.usage.request import allowed_models
from db.repos import core as core_repo
from db.repos import usage as repo

RESET_WORDS = {"default", "reset"}


async def model_reply(app: App, telegram_user_id: int, name: str, args: str) -> str:
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
            await repo.set_model(db, user.id, None)
            return f"Back to the default model: {s.llm_model}."
        match = next((m for m in models if m.lower() == wanted.lower()), None)
        if match is None:
            return f"I don't know the model {wanted!r}. Pick one of: {', '.join(models)}."
        await repo.set_model(db, user.id, None if match == s.llm_model else match)
        return f"Your model is now {match}."


def build_router() -> Router:
    router = Router(name="model")

    @router.message(Command("model"), flags={"command": ("model", "show or switch your model")})
    async def on_model(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        user = message.from_user
        text = await model_reply(app, user.id, user.full_name, command.args or "")
        await send_plain(message.bot, message.chat.id, text)

    return router
