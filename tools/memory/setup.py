"""Builds the memory store once at startup and says when the index needs a reindex."""

from __future__ import annotations

import logging

import httpx
from pydantic import SecretStr

from db.engine import SessionFactory
from tools.base import Clock
from tools.feature import Host
from tools.memory.embeddings import build_embedder
from tools.memory.settings import MemorySettings
from tools.memory.store import MemoryStore

log = logging.getLogger(__name__)


async def build_memory(
    settings: MemorySettings,
    sf: SessionFactory,
    http: httpx.AsyncClient,
    clock: Clock,
    default_url: str = "",
    default_key: SecretStr | None = None,
) -> MemoryStore:
    """`default_url`/`default_key`: where an embeddings model is asked for unless
    EMBEDDINGS_BASE_URL / EMBEDDINGS_API_KEY say."""
    embedder = build_embedder(settings, http, default_url, default_key)
    store = MemoryStore(sf, embedder, settings, clock)
    status = await store.index_status()
    if not status.ok:
        log.warning("memory index %s; until then recall matches words only", status.detail)
    return store


async def store_part(host: Host) -> MemoryStore:
    """The memory feature's store (MEMORY), built with the app before the tools; embeddings
    go to the chat model's endpoint unless EMBEDDINGS_BASE_URL says otherwise."""
    deps = host.deps
    end = deps.endpoint
    key = SecretStr(end.api_key) if end is not None and end.api_key else None
    settings = deps.settings_for(MemorySettings)
    return await build_memory(
        settings, deps.session_factory, deps.http, deps.clock, end.base_url if end else "", key
    )
