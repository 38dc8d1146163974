"""WordLlama embeddings from the mapped table (tools/memory/embeddings.py) are bit for bit
those of the wordllama package with its own in-memory float32 copy; a file that is not
the float16 table it expects is refused."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np
import pytest
import wordllama
from wordllama import WordLlama

from tools.memory.embeddings import (
    MappedWordLlama,
    WordLlamaEmbedder,
    _load_wordllama,
    map_f16_tensor,
    normalise_rows,
)

FOLDER = Path(wordllama.__file__).parent
TEXTS = ["hello, remember I like tea", "Ünïcödé 日本語 😀", "x", "a much longer sentence " * 40]
# More than one batch of 64, uneven lengths: padding differs from batch to batch.
MANY = [f"note {i}: {'tea and biscuits ' * (i % 7)}{i * 37}" for i in range(150)]


def test_embeddings_are_bit_for_bit_those_of_the_package() -> None:
    mapped = WordLlamaEmbedder()
    mapped.load()
    assert isinstance(_load_wordllama(256), MappedWordLlama)
    own = WordLlama.load(dim=256, cache_dir=FOLDER, disable_download=True)
    for texts in (TEXTS, MANY, TEXTS[:1]):
        got = mapped.embed_sync(texts)
        assert got.dtype == np.float32 and got.shape == (len(texts), 256)
        assert np.array_equal(got, normalise_rows(own.embed(texts, norm=True)))
        assert np.array_equal(_load_wordllama(256).embed(texts), own.embed(texts))


def safetensors(path: Path, table: np.ndarray, dtype: str = "F16") -> Path:
    data = table.tobytes()
    entry = {"dtype": dtype, "shape": list(table.shape), "data_offsets": [0, len(data)]}
    header = json.dumps({"embedding.weight": entry}).encode()
    path.write_bytes(struct.pack("<Q", len(header)) + header + data)
    return path


def test_only_a_float16_table_is_mapped(tmp_path: Path) -> None:
    table = np.arange(40 * 8, dtype=np.float16).reshape(40, 8)
    path = safetensors(tmp_path / "t.safetensors", table)
    assert np.array_equal(map_f16_tensor(path, "embedding.weight"), table)
    wide = safetensors(tmp_path / "w.safetensors", table.astype(np.float32), dtype="F32")
    with pytest.raises(ValueError, match="float16"):
        map_f16_tensor(wide, "embedding.weight")
    with pytest.raises(FileNotFoundError):
        MappedWordLlama(tmp_path, 256)
