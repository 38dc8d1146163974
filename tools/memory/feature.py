"""Memory: long/mid/short/session memories (sqlite-vec + FTS5, or pgvector + tsvector),
the `memory` tool, auto-recall into the prompt's context block, /memory with its forget
buttons, and the hourly sweep of expired memories."""

from __future__ import annotations

import asyncio

from tools.feature import Command, Feature, Host, Job, Provide, Setup
from tools.memory.settings import MemorySettings


def setup() -> Setup:
    from tools.base import CheckResult
    from tools.memory import commands, recall_context, reembed
    from tools.memory.doctor import check_memory
    from tools.memory.embeddings import WordLlamaEmbedder, wordllama_installed
    from tools.memory.minilm import MiniLMEmbedder
    from tools.memory.models import Memory, MemoryMeta
    from tools.memory.reembed import REEMBED, Reembed
    from tools.memory.setup import store_part
    from tools.memory.store import MEMORY
    from tools.memory.sweep import EVERY, sweep
    from tools.memory.tool import TOOL

    async def warm(host: Host) -> None:
        """The offline embedding model (memory and tool_search both use it), loaded in a
        thread so the first message rarely waits for it."""

        def load() -> None:
            if wordllama_installed():
                WordLlamaEmbedder().load()
            embedder = host.part(MEMORY).embedder
            if isinstance(embedder, MiniLMEmbedder):
                embedder.load()

        await asyncio.to_thread(load)

    async def check(host: Host) -> list[CheckResult]:
        return await check_memory(host.part(MEMORY))

    return Setup(
        tools=(TOOL,),
        models=(Memory, MemoryMeta),
        commands=(
            Command(
                "memory",
                "what I remember about you",
                commands.memory,
                private=True,
                args="[layer | search <text> | forget <id>]",
            ),
        ),
        press=commands.press,
        parts=(
            Provide(MEMORY, store_part),
            # After an upgrade that changed the embedder: every memory re-embedded while the
            # bot answers (tools/memory/reembed.py).
            Provide(REEMBED, reembed.start, Reembed.stop, on_start=True),
        ),
        jobs=(Job("memory-sweep", "delete expired memories", EVERY, sweep),),
        context=(recall_context.from_deps,),
        warm=(warm,),
        doctor=check,
    )


FEATURE = Feature(name="memory", settings=MemorySettings, setup=setup)
