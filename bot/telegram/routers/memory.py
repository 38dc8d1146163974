"""/memory: the user's memories by layer, paged, each with a (confirmed) forget button;
/memory search <text>; /memory forget <id>. Every line says where the memory came from."""

from __future__ import annotations

from aiogram import F, Router
from aiogram.filters import Command, CommandObject
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.app import App
from bot.telegram.render import send_chunk, send_plain
from db.repos import core as core_repo
from tools.memory.store import LAYERS, MemoryHit, MemoryStore

PREFIX = "mem:"
PAGE = 5
USAGE = "Usage: /memory [long|mid|short|session] · /memory search <text> · /memory forget <id>"


def _line(h: MemoryHit) -> str:
    content = h.content if len(h.content) <= 300 else h.content[:299] + "…"
    cat = f" · {h.category}" if h.category else ""
    rel = f" · {h.relevance:.2f}" if h.relevance is not None else ""
    return f"#{h.id} [{h.layer}{cat}{rel}] {content}\n    from {h.source()}"


def _button(text: str, data: str) -> InlineKeyboardButton:
    return InlineKeyboardButton(text=text, callback_data=PREFIX + data)


async def _user_id(app: App, tg_id: int, name: str) -> int:
    async with app.session_factory() as s, s.begin():
        return (await core_repo.get_or_create_user(s, tg_id, name, app.deps.clock())).id


async def _page(
    store: MemoryStore, user_id: int, layer: str, page: int
) -> tuple[str, InlineKeyboardMarkup]:
    found = await store.page(user_id=user_id, layer=layer, offset=page * PAGE, limit=PAGE)
    pages = max(1, -(-found.total // PAGE))
    if not found.items:
        text = f"No {layer} memories." if page == 0 else f"No page {page + 1} of {layer}."
    else:
        head = f"{layer} memories, page {page + 1}/{pages} ({found.total} in all):"
        text = "\n\n".join([head, *(_line(h) for h in found.items)])
    rows = [[_button(f"🗑 Forget #{h.id}", f"f:{h.id}")] for h in found.items]
    nav = []
    if page > 0:
        nav.append(_button("◀ Prev", f"p:{layer}:{page - 1}"))
    if page + 1 < pages:
        nav.append(_button("Next ▶", f"p:{layer}:{page + 1}"))
    if nav:
        rows.append(nav)
    rows.append([_button(("• " if x == layer else "") + x, f"p:{x}:0") for x in LAYERS])
    return text, InlineKeyboardMarkup(inline_keyboard=rows)


def build_router() -> Router:
    router = Router(name="memory")

    @router.message(
        Command("memory"),
        flags={"command": ("memory", "what I remember about you: list, search, forget")},
    )
    async def on_memory(message: Message, command: CommandObject, app: App) -> None:
        assert message.bot is not None and message.from_user is not None
        bot, chat = message.bot, message.chat.id
        store = app.deps.memory
        if store is None:
            await send_plain(bot, chat, "Memory is not available.")
            return
        user_id = await _user_id(app, message.from_user.id, message.from_user.full_name)
        verb, _, rest = (command.args or "").strip().partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb in ("", *LAYERS):
            text, markup = await _page(store, user_id, verb or "long", 0)
            await send_chunk(bot, chat, text, [], markup)
        elif verb == "search" and rest:
            hits = await store.recall(user_id=user_id, query=rest, limit=10)
            text = "\n\n".join(_line(h) for h in hits) if hits else "Nothing matches."
            await send_plain(bot, chat, text)
        elif verb == "forget" and rest.lstrip("#").isdigit():
            mid = int(rest.lstrip("#"))
            ok = await store.forget(user_id=user_id, memory_id=mid)
            await send_plain(bot, chat, f"Forgot #{mid}." if ok else f"There is no memory #{mid}.")
        else:
            await send_plain(bot, chat, USAGE)

    @router.callback_query(F.data.startswith(PREFIX))
    async def on_button(query: CallbackQuery, app: App) -> None:
        assert query.bot is not None and query.data is not None
        store = app.deps.memory
        chat = query.message.chat.id if query.message is not None else query.from_user.id
        parts = query.data.removeprefix(PREFIX).split(":")
        if store is None or not parts:
            await query.answer("Memory is not available.", show_alert=True)
            return
        user_id = await _user_id(app, query.from_user.id, query.from_user.full_name)
        kind, args = parts[0], parts[1:]
        if kind == "p" and len(args) == 2 and args[0] in LAYERS and args[1].isdigit():
            text, markup = await _page(store, user_id, args[0], int(args[1]))
            await send_chunk(query.bot, chat, text, [], markup)
        elif kind in ("f", "y", "n") and len(args) == 1 and args[0].isdigit():
            mid = int(args[0])
            hit = await store.get(user_id=user_id, memory_id=mid)
            if hit is None:
                await query.answer(f"There is no memory #{mid}.", show_alert=True)
                return
            if kind == "f":
                markup = InlineKeyboardMarkup(
                    inline_keyboard=[
                        [_button("Yes, forget it", f"y:{mid}"), _button("Keep it", f"n:{mid}")]
                    ]
                )
                await send_chunk(query.bot, chat, f"Forget this?\n\n{_line(hit)}", [], markup)
            elif kind == "y":
                await store.forget(user_id=user_id, memory_id=mid)
                await send_plain(query.bot, chat, f"Forgot #{mid}.")
            else:
                await send_plain(query.bot, chat, f"Kept #{mid}.")
        else:
            await query.answer("That button is not valid any more.", show_alert=True)
            return
        await query.answer()

    return router
