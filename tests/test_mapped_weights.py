"""WordLlama with its table mapped from the wheel's file embeds exactly as WordLlama with
its own in-memory float32 copy; a file that does not match is refused."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import wordllama
from wordllama import WordLlama

from tools.mapped_weights import Float32Rows, map_f16_tensor, mapped_rows
from tools.memory.embeddings import WordLlamaEmbedder, _load_wordllama, normalise_rows

FOLDER = Path(wordllama.__file__).parent
WEIGHTS = FOLDER / "weights" / "l2_supercat_256.safetensors"
TEXTS = ["hello, remember I like tea", "Ünïcödé 日本語 😀", "x", "a much longer sentence " * 40]


def test_embeddings_are_bit_for_bit_those_of_the_loaded_copy() -> None:
    mapped = WordLlamaEmbedder()
    mapped.load()
    assert isinstance(_load_wordllama(256).embedding, Float32Rows)
    own = WordLlama.load(dim=256, cache_dir=FOLDER, disable_download=True)
    assert isinstance(own.embedding, np.ndarray)
    got = mapped.embed_sync(TEXTS)
    assert np.array_equal(got, normalise_rows(own.embed(TEXTS, norm=True)))
    assert np.array_equal(mapped.embed_sync(TEXTS[:2]), got[:2])


def safetensors(path: Path, table: np.ndarray, dtype: str = "F16") -> Path:
    data = table.tobytes()
    header = json.dumps(
        {
            "embedding.weight": {
                "dtype": dtype,
                "shape": list(table.shape),
                "data_offsets": [0, len(data)],
            }
        }
    ).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_a_table_that_differs_from_the_loaded_one_is_refused(tmp_path: Path) -> None:
    table = np.arange(40 * 8, dtype=np.float16).reshape(40, 8)
    path = safetensors(tmp_path / "t.safetensors", table)
    assert np.array_equal(map_f16_tensor(path, "embedding.weight"), table)
    rows = mapped_rows(path, table.astype(np.float32))
    assert rows[[3, 39]].dtype == np.float32 and rows.shape == (40, 8)
    with pytest.raises(ValueError, match="differ"):
        mapped_rows(path, table.astype(np.float32) + 1)
    with pytest.raises(ValueError, match="shape"):
        mapped_rows(path, np.zeros((41, 8), np.float32))
    wide = safetensors(tmp_path / "w.safetensors", table.astype(np.float32), dtype="F32")
    with pytest.raises(ValueError, match="float16"):
        map_f16_tensor(wide, "embedding.weight")
