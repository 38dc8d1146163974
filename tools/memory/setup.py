"""Builds the memory store once at startup and says when the index needs a reindex."""

from __future__ import annotations

import logging

import httpx

from bot.config import Settings
from db.engine import SessionFactory
from tools.base import Clock
from tools.memory.embeddings import build_embedder
from tools.memory.store import MemoryStore

log = logging.getLogger(__name__)


async def build_memory(
    settings: Settings, sf: SessionFactory, http: httpx.AsyncClient, clock: Clock
) -> MemoryStore:
    store = MemoryStore(sf, build_embedder(settings, http), settings, clock)
    status = await store.index_status()
    if not status.ok:
        log.warning("memory index %s; until then recall matches words only", status.detail)
    return store
