"""EMBEDDINGS=<a model> against a local /v1/embeddings server speaking the OpenAI format."""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import numpy as np
import pytest
from aiohttp import web

from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core
from tests.conftest import make_settings
from tools.memory import repo
from tools.memory.embeddings import OpenAIEmbedder, build_embedder
from tools.memory.store import MemoryStore

pytestmark = pytest.mark.db  # every test here opens its own database

DIM = 16


def bag_of_words(text: str) -> list[float]:
    """A deterministic toy embedding: each word lands in one of 16 buckets."""
    v = np.zeros(DIM)
    for w in text.lower().split():
        v[int(hashlib.md5(w.strip(".,?!").encode()).hexdigest(), 16) % DIM] += 1.0
    return list(v)


class EmbeddingServer:
    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        self.auth: list[str | None] = []
        self.fail = False

    async def handle(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.requests.append(body)
        self.auth.append(request.headers.get("Authorization"))
        if self.fail:
            return web.json_response({"error": {"message": "overloaded"}}, status=503)
        data = [
            {"object": "embedding", "index": i, "embedding": bag_of_words(t)}
            for i, t in enumerate(body["input"])
        ]
        return web.json_response({"object": "list", "data": data, "model": body["model"]})


@pytest.fixture
async def server() -> AsyncIterator[tuple[EmbeddingServer, str]]:
    srv = EmbeddingServer()
    app = web.Application()
    app.router.add_post("/v1/embeddings", srv.handle)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield srv, f"http://127.0.0.1:{port}/v1"
    await runner.cleanup()


async def test_openai_embeddings_store_and_recall(
    tmp_path: Path, server: tuple[EmbeddingServer, str]
) -> None:
    srv, url = server
    settings = make_settings(tmp_path, embeddings="toy-embed", embeddings_base_url=url)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf = session_factory(engine)
    async with httpx.AsyncClient() as http:
        embedder = build_embedder(settings, http, settings.llm_base_url, settings.llm_api_key)
        assert isinstance(embedder, OpenAIEmbedder) and embedder.name == "openai:toy-embed"
        store = MemoryStore(sf, embedder, settings, lambda: datetime.now(UTC))
        assert (await store.index_status()).ok
        async with sf() as s, s.begin():
            user = await core.get_or_create_user(s, 1, "Ann", store._clock())
        await store.store(user_id=user.id, layer="long", content="Favourite fruit is mango")
        async with sf() as s:
            assert await repo.vec_dim(s) == DIM  # the empty index took the model's size
        await store.store(user_id=user.id, layer="long", content="Works night shifts")
        hits = await store.recall(user_id=user.id, query="mango", limit=1)
        assert [h.content for h in hits] == ["Favourite fruit is mango"]
        assert srv.requests[0]["model"] == "toy-embed"
        # The LLM key is the default key, sent as a bearer token.
        assert srv.auth[0] == "Bearer sk-test-secret-key-123456"

        # The endpoint fails: storing and recalling still work, by words.
        srv.fail = True
        res = await store.store(user_id=user.id, layer="long", content="Has two cats")
        assert res.id and not res.updated
        assert [h.content for h in await store.recall(user_id=user.id, query="cats")] == [
            "Has two cats"
        ]
    await engine.dispose()
