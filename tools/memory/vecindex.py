"""An in-process copy of one user's vectors for fast KNN on large memories.

sqlite-vec's vec0 scan costs about 0.4 µs a row on this hardware (38 ms at 100k memories of
one user); a numpy matrix product over the same float32 rows takes a few ms. memory_vec stays
the durable index: a user's rows are loaded from it on first use once they have at least
`min_rows` memories (5k: about 5 MB a user; recall at 10k went from 15 to 9 ms against
20k), and the store keeps the copy in step with its own writes. Writes by
another process (`sidekick memory reindex`) are not seen: restart the bot after a reindex.
"""

from __future__ import annotations

import numpy as np

LAYER_CODES = {"long": 0, "mid": 1, "short": 2, "session": 3}
# KNN first compares the leading HEAD dimensions of every row (WordLlama, like OpenAI's
# text-embedding-3, is trained so that its leading dimensions are an embedding of their
# own), then the full rows of the best `SHORTLIST_PER_K * k` (at least SHORTLIST_MIN): half
# the memory read a query (the copy is 1.5x the vectors), and on 20k WordLlama rows 99.98%
# of the exact 50 nearest.
HEAD = 128
SHORTLIST_PER_K = 8
SHORTLIST_MIN = 2000
# Rows of HEAD values per matrix-vector product: OpenBLAS runs a product over more than
# ~460k values on all cores, which on a small shared machine waits for busy cores (KNN at
# 100k memories p50 6.7 ms, p95 20 ms, against 1.8 / 1.9 ms in blocks this size;
# bench/memory_recall.py).
# Wider rows go in proportionally fewer: the full-width pass over the shortlist (2000 rows
# of 256) was one 512k product, and KNN took 14-16 ms instead of 3-4 on a busy machine.
BLOCK_ROWS = 2048


def dot(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """mat @ q in row blocks, each small enough for OpenBLAS to keep on one thread."""
    out = np.empty(mat.shape[0], dtype=np.float32)
    step = max(1, BLOCK_ROWS * HEAD // max(1, mat.shape[1]))
    for i in range(0, mat.shape[0], step):
        np.dot(mat[i : i + step], q, out=out[i : i + step])
    return out


class UserVectors:
    """One user's rows in preallocated arrays: adds write in place (growing by doubling),
    removes only clear an `alive` flag, so a write never copies the whole matrix."""

    def __init__(self, dim: int | None = None, capacity: int = 1024) -> None:
        self._cap = capacity
        self._dim = dim
        self.n = 0
        self._mat: np.ndarray | None = None
        self._head: np.ndarray | None = None  # the first HEAD columns, contiguous
        self._ids = np.zeros(capacity, dtype=np.int64)
        self._layers = np.zeros(capacity, dtype=np.int8)
        self._expires = np.zeros(capacity, dtype=np.int64)
        self._alive = np.zeros(capacity, dtype=bool)
        self._pos: dict[int, int] = {}

    @property
    def ids(self) -> list[int]:
        return [int(i) for i in self._ids[: self.n][self._alive[: self.n]]]

    def _grow(self) -> None:
        self._cap *= 2
        assert self._mat is not None and self._head is not None
        self._mat = np.resize(self._mat, (self._cap, self._mat.shape[1]))
        self._head = np.resize(self._head, (self._cap, self._head.shape[1]))
        for name in ("_ids", "_layers", "_expires", "_alive"):
            old = getattr(self, name)
            new = np.zeros(self._cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def add(self, mid: int, layer: str, expires: int, vec: np.ndarray) -> None:
        vec = np.asarray(vec, dtype=np.float32)
        if self._mat is None:
            self._mat = np.zeros((self._cap, vec.shape[0]), dtype=np.float32)
            self._head = np.zeros((self._cap, min(HEAD, vec.shape[0])), dtype=np.float32)
        pos = self._pos.get(mid)
        if pos is None:
            if self.n == self._cap:
                self._grow()
            pos, self.n = self.n, self.n + 1
            self._pos[mid] = pos
        self._mat[pos] = vec
        assert self._head is not None
        self._head[pos] = vec[: self._head.shape[1]]
        self._ids[pos] = mid
        self._layers[pos] = LAYER_CODES.get(layer, 9)
        self._expires[pos] = expires
        self._alive[pos] = True

    def remove(self, ids: list[int]) -> None:
        for mid in ids:
            pos = self._pos.pop(mid, None)
            if pos is not None:
                self._alive[pos] = False

    def knn(self, q: np.ndarray, k: int, layer: str | None, now: int) -> list[tuple[int, float]]:
        """(memory id, cosine distance) of the k nearest live rows, nearest first."""
        if self._mat is None or self.n == 0:
            return []
        n = self.n
        q = np.asarray(q, dtype=np.float32)
        mask = self._alive[:n] & (self._expires[:n] > now)
        if layer is not None:
            mask &= self._layers[:n] == LAYER_CODES.get(layer, 9)
        k = min(k, int(mask.sum()))
        if k <= 0:
            return []
        short = max(SHORTLIST_PER_K * k, SHORTLIST_MIN)
        if short < n and self._head is not None:
            rough = np.where(mask, dot(self._head[:n], q[: self._head.shape[1]]), -np.inf)
            rows = np.argpartition(-rough, short - 1)[:short]
            rows = rows[mask[rows]]
        else:
            rows = np.flatnonzero(mask)
        sims = dot(self._mat[rows], q)
        k = min(k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top])]
        return [(int(self._ids[rows[i]]), float(1.0 - sims[i])) for i in top]


class VectorCache:
    def __init__(self, min_rows: int = 5_000) -> None:
        self.min_rows = min_rows
        self.users: dict[int, UserVectors] = {}

    def get(self, user_id: int) -> UserVectors | None:
        return self.users.get(user_id)

    def clear(self) -> None:
        self.users.clear()
