"""`sidekick memory reindex`: re-embed every memory with the configured embedder."""

from __future__ import annotations

import sys

from bot.config import Settings


async def reindex(settings: Settings) -> None:
    from bot.app import build_app

    app = await build_app(settings)
    try:
        store = app.deps.memory
        if store is None:
            print("memory is not configured", file=sys.stderr)
            return

        def progress(done: int, total: int) -> None:
            print(f"\rre-embedded {done}/{total}", end="", file=sys.stderr, flush=True)

        done = await store.reindex(progress)
        print(f"\nmemory index rebuilt with {store.embedder.name}: {done} memories", flush=True)
    finally:
        await app.close()
