"""WordLlama embeddings with the table read straight from its safetensors file
(memory-mapped) instead of copied into the process.

WordLlama converts its float16 table to a float32 copy in memory, all of it resident.
Mapped, the file's pages are shared with the page cache (and any other worker) and only
the rows texts actually use are ever read. Rows are converted to float32 on lookup;
float16 -> float32 is exact, so every embedding comes out bit for bit as before.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path
from typing import Any

import numpy as np


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
