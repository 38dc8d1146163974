"""/memory: the user's memories by layer, paged, each with a (confirmed) forget button where
the adapter shows buttons; /memory search <text>; /memory forget <id>. Every line says
where the memory came from, and what it replaced (the older facts a newer one superseded,
with their dates). Both adapters render these answers; the terminal, which has no
buttons, turns pages with /memory <layer> <page>. And `sidekick memory reindex`, after an
embedder change."""

from __future__ import annotations

import sys

from tools.feature import Answer, Button, CommandCall, Pressed, row_id
from tools.memory.store import LAYERS, MEMORY, Former, MemoryHit, MemoryStore

PAGE = 5
USAGE = (
    "Usage: /memory [long|mid|short|session] [page] · /memory search <text> · /memory forget <id>"
)
STALE = "That button is not valid any more."


def _line(h: MemoryHit, before: list[Former] | None = None) -> str:
    content = h.content if len(h.content) <= 300 else h.content[:299] + "…"
    cat = f" · {h.category}" if h.category else ""
    rel = f" · {h.relevance:.2f}" if h.relevance is not None else ""
    was = "".join(f"\n    was: {f.line()}" for f in reversed(before or []))
    return f"#{h.id} [{h.layer}{cat}{rel}] {content}\n    from {h.source()}{was}"


def memory_id(text: str) -> int | None:
    """`#12` or `12` as a memory id; None for anything else (tools/feature.py row_id)."""
    return row_id(text.removeprefix("#"))


def _number(text: str) -> int | None:
    """A page number (ASCII digits, a few of them: the offset stays a small integer)."""
    return int(text) if text.isascii() and text.isdigit() and len(text) <= 6 else None


async def _page(store: MemoryStore, user_id: int, layer: str, page: int) -> Answer:
    found = await store.page(user_id=user_id, layer=layer, offset=page * PAGE, limit=PAGE)
    pages = max(1, -(-found.total // PAGE))
    if not found.items:
        text = f"No {layer} memories." if page == 0 else f"No page {page + 1} of {layer}."
    else:
        head = f"{layer} memories, page {page + 1}/{pages} ({found.total} in all):"
        formers = await store.history(user_id=user_id, ids=[h.id for h in found.items])
        text = "\n\n".join([head, *(_line(h, formers.get(h.id)) for h in found.items)])
    rows: list[tuple[Button, ...]] = [
        (Button(f"🗑 Forget #{h.id}", f"f:{h.id}"),) for h in found.items
    ]
    nav = []
    if page > 0:
        nav.append(Button("◀ Prev", f"page:{layer}:{page - 1}"))
    if page + 1 < pages:
        nav.append(Button("Next ▶", f"page:{layer}:{page + 1}"))
    if nav:
        rows.append(tuple(nav))
    rows.append(tuple(Button(("• " if x == layer else "") + x, f"page:{x}:0") for x in LAYERS))
    return Answer(text, tuple(rows))


async def memory(call: CommandCall) -> Answer | str:
    store, user_id = call.host.part(MEMORY), call.who.user_id
    verb, _, rest = call.args.strip().partition(" ")
    verb, rest = verb.lower(), rest.strip()
    if verb in ("", *LAYERS):
        page = _number(rest)
        return await _page(store, user_id, verb or "long", max(page - 1, 0) if page else 0)
    if verb == "search" and rest:
        hits = await store.recall(user_id=user_id, query=rest, limit=10)
        return "\n\n".join(_line(h) for h in hits) if hits else "Nothing matches."
    if verb == "forget" and (mid := memory_id(rest)) is not None:
        ok = await store.forget(user_id=user_id, memory_id=mid)
        return f"Forgot #{mid}." if ok else f"There is no memory #{mid}."
    return USAGE


async def _turn_page(store: MemoryStore, user_id: int, data: str) -> Pressed:
    layer, _, number = data.partition(":")
    page = _number(number)
    if layer not in LAYERS or page is None:
        return Pressed(STALE, alert=True)
    return Pressed("", await _page(store, user_id, layer, page))


async def press(call: CommandCall) -> Pressed:
    """A button under /memory: another page or layer, or forget (f: ask to confirm, y:
    forget it, n: keep it). The message shows the answer in place of the list."""
    store, user_id = call.host.part(MEMORY), call.who.user_id
    step, _, rest = call.args.partition(":")
    if step == "page":
        return await _turn_page(store, user_id, rest)
    mid = memory_id(rest)
    if step not in ("f", "y", "n") or mid is None or mid == 0:
        return Pressed(STALE, alert=True)
    hit = await store.get(user_id=user_id, memory_id=mid)
    if hit is None:
        return Pressed(f"There is no memory #{mid}.", alert=True)
    if step == "f":
        confirm = (Button("Yes, forget it", f"y:{mid}"), Button("Keep it", f"n:{mid}"))
        return Pressed("", Answer(f"Forget this?\n\n{_line(hit)}", (confirm,)))
    if step == "y":
        await store.forget(user_id=user_id, memory_id=mid)
        return Pressed(f"Forgot #{mid}.", Answer(f"Forgot #{mid}."))
    return Pressed(f"Kept #{mid}.", Answer(f"Kept #{mid}."))


async def reindex_command(store: MemoryStore | None) -> None:
    """`sidekick memory reindex` on the app's store, its progress on stderr."""
    if store is None:
        print("memory is not configured", file=sys.stderr)
        return

    def progress(done: int, total: int) -> None:
        print(f"\rre-embedded {done}/{total}", end="", file=sys.stderr, flush=True)

    done = await store.reindex(progress)
    print(f"\nmemory index rebuilt with {store.embedder.name}: {done} memories", flush=True)
