"""EMBEDDINGS=minilm, whose in-process forward pass went, is refused at start-up with how to
get the same vectors from llama-server instead."""

from __future__ import annotations

import httpx
import pytest

from tools.errors import ConfigError
from tools.memory.embeddings import build_embedder
from tools.memory.settings import MemorySettings


async def test_minilm_is_refused_with_the_llama_server_way() -> None:
    async with httpx.AsyncClient() as http:
        with pytest.raises(ConfigError, match=r"llama-server .*EMBEDDINGS=all-minilm-l6-v2"):
            build_embedder(MemorySettings(embeddings="minilm"), http)
