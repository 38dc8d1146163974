"""/memory: the user's memories by layer, paged, each with a (confirmed) forget button;
/memory search <text>; /memory forget <id>. Every line says where the memory came from."""

from __future__ import annotations

from aiogram import Bot, Router
from aiogram.filters import CommandObject
from aiogram.filters.callback_data import CallbackData
from aiogram.types import CallbackQuery, InlineKeyboardButton, InlineKeyboardMarkup, Message

from bot.app import App
from bot.telegram.commands import on_command
from bot.telegram.render import send_chunk, send_plain
from bot.telegram.user import ChatUser, use_user
from tools.memory.store import LAYERS, MemoryHit, MemoryStore

PAGE = 5
MAX_ID = 2**31 - 1  # memories.id is an INTEGER: 32 bits on PostgreSQL
USAGE = "Usage: /memory [long|mid|short|session] · /memory search <text> · /memory forget <id>"


def _line(h: MemoryHit) -> str:
    content = h.content if len(h.content) <= 300 else h.content[:299] + "…"
    cat = f" · {h.category}" if h.category else ""
    rel = f" · {h.relevance:.2f}" if h.relevance is not None else ""
    return f"#{h.id} [{h.layer}{cat}{rel}] {content}\n    from {h.source()}"


def memory_id(text: str) -> int | None:
    """`#12` or `12` as a memory id; None for anything else. Only ASCII digits (str.isdigit
    also takes "²", which int() refuses) and no more than a database integer holds (a
    longer number overflowed the driver and failed the command)."""
    digits = text.removeprefix("#")
    if not digits.isascii() or not digits.isdigit() or len(digits) > 10:
        return None
    number = int(digits)
    return number if number <= MAX_ID else None


class MemPage(CallbackData, prefix="mempage"):
    layer: str
    page: int


class MemForget(CallbackData, prefix="mem"):
    """f: ask to confirm, y: forget it, n: keep it."""

    step: str
    memory_id: int


def _button(text: str, data: CallbackData) -> InlineKeyboardButton:
    return InlineKeyboardButton(text=text, callback_data=data.pack())


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
    rows = [
        [_button(f"🗑 Forget #{h.id}", MemForget(step="f", memory_id=h.id))] for h in found.items
    ]
    nav = []
    if page > 0:
        nav.append(_button("◀ Prev", MemPage(layer=layer, page=page - 1)))
    if page + 1 < pages:
        nav.append(_button("Next ▶", MemPage(layer=layer, page=page + 1)))
    if nav:
        rows.append(nav)
    rows.append(
        [_button(("• " if x == layer else "") + x, MemPage(layer=x, page=0)) for x in LAYERS]
    )
    return text, InlineKeyboardMarkup(inline_keyboard=rows)


def build_router() -> Router:
    router = use_user(Router(name="memory"))

    @router.message(on_command("memory"), flags={"command": "memory"})
    async def on_memory(
        message: Message, command: CommandObject, bot: Bot, app: App, user: ChatUser
    ) -> None:
        chat = message.chat.id
        store = app.deps.memory
        if store is None:
            await send_plain(bot, chat, "Memory is not available.")
            return
        verb, _, rest = (command.args or "").strip().partition(" ")
        verb, rest = verb.lower(), rest.strip()
        if verb in ("", *LAYERS):
            text, markup = await _page(store, user.id, verb or "long", 0)
            await send_chunk(bot, chat, text, [], markup)
        elif verb == "search" and rest:
            hits = await store.recall(user_id=user.id, query=rest, limit=10)
            text = "\n\n".join(_line(h) for h in hits) if hits else "Nothing matches."
            await send_plain(bot, chat, text)
        elif verb == "forget" and (mid := memory_id(rest)) is not None:
            ok = await store.forget(user_id=user.id, memory_id=mid)
            await send_plain(bot, chat, f"Forgot #{mid}." if ok else f"There is no memory #{mid}.")
        else:
            await send_plain(bot, chat, USAGE)

    @router.callback_query(MemPage.filter())
    async def on_page(
        query: CallbackQuery, callback_data: MemPage, bot: Bot, app: App, user: ChatUser
    ) -> None:
        store = app.deps.memory
        if store is None or callback_data.layer not in LAYERS or callback_data.page < 0:
            await query.answer("That button is not valid any more.", show_alert=True)
            return
        text, markup = await _page(store, user.id, callback_data.layer, callback_data.page)
        await send_chunk(bot, _chat(query), text, [], markup)
        await query.answer()

    @router.callback_query(MemForget.filter())
    async def on_forget(
        query: CallbackQuery, callback_data: MemForget, bot: Bot, app: App, user: ChatUser
    ) -> None:
        store, mid, step = app.deps.memory, callback_data.memory_id, callback_data.step
        if store is None or step not in ("f", "y", "n") or not 0 < mid <= MAX_ID:
            await query.answer("That button is not valid any more.", show_alert=True)
            return
        hit = await store.get(user_id=user.id, memory_id=mid)
        if hit is None:
            await query.answer(f"There is no memory #{mid}.", show_alert=True)
            return
        chat = _chat(query)
        if step == "f":
            yes, keep = MemForget(step="y", memory_id=mid), MemForget(step="n", memory_id=mid)
            markup = InlineKeyboardMarkup(
                inline_keyboard=[[_button("Yes, forget it", yes), _button("Keep it", keep)]]
            )
            await send_chunk(bot, chat, f"Forget this?\n\n{_line(hit)}", [], markup)
        elif step == "y":
            await store.forget(user_id=user.id, memory_id=mid)
            await send_plain(bot, chat, f"Forgot #{mid}.")
        else:
            await send_plain(bot, chat, f"Kept #{mid}.")
        await query.answer()

    return router


def _chat(query: CallbackQuery) -> int:
    return query.message.chat.id if query.message is not None else query.from_user.id
