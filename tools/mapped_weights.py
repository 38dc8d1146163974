"""Embedding tables read straight from their safetensors file (memory-mapped) instead of
copied into the process.

WordLlama converts its float16 table (32000 x 256) to a float32 copy in memory: ~32 MB
per process, all of it resident. Mapped, the file's pages are shared with the page cache
(and any other worker) and only the rows texts actually use are ever read. Rows are
handed out as float32, converted on lookup; float16 -> float32 is exact, so every
embedding comes out bit for bit as before.
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


class Float32Rows:
    """What WordLlama's inference reads of its table (`shape`, `table[ids]`), as float32."""

    def __init__(self, table: np.memmap[Any, np.dtype[np.float16]]) -> None:
        self._table = table
        self.shape: tuple[int, ...] = table.shape
        self.dtype = np.dtype(np.float32)

    def __getitem__(self, index: Any) -> np.ndarray:
        return np.asarray(self._table[index], dtype=np.float32)

    def __len__(self) -> int:
        return self.shape[0]


def mapped_rows(path: Path, loaded: np.ndarray, key: str = "embedding.weight") -> Float32Rows:
    """The mapped stand-in for `loaded` (the table as the library loaded it), after a
    check on a spread of rows that both hold the same numbers."""
    rows = Float32Rows(map_f16_tensor(path, key))
    if rows.shape != loaded.shape:
        raise ValueError(f"{path.name}: shape {rows.shape}, loaded {loaded.shape}")
    sample = np.unique(np.linspace(0, loaded.shape[0] - 1, 64).astype(np.int64))
    if not np.array_equal(rows[sample], loaded[sample]):
        raise ValueError(f"{path.name}: mapped rows differ from the loaded table")
    return rows
