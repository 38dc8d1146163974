"""An in-process copy of one user's vectors for fast KNN on large memories (SQLite only).

sqlite-vec's vec0 reads every row of the user on every query, so its KNN grows with the
user's memories much faster than the narrowing passes below over a copy in numpy arrays;
from a few thousand memories on, the copy pays for its load. memory_vec stays the durable
index: a user's rows are loaded from it on first use once they have at least `min_rows`
memories. Every vector-index write counts up a generation in the database
(db/repos/memory.py); the copies hold the generation they reflect, the store applies its
own writes to them, and a write by anyone else (another process, another engine) drops
them to be reloaded.

PostgreSQL keeps no copy: pgvector's HNSW index answers, and several workers share it.
"""

from __future__ import annotations

import numpy as np

LAYER_CODES = {"long": 0, "mid": 1, "short": 2, "session": 3}
# KNN narrows in three passes, each reading little memory (a first pass over the float32
# rows is bound by memory bandwidth at large sizes).
# 1. The sign bits of every row (32 bytes a row at 256 dimensions) by Hamming distance
#    to the query's: the best `BITS_PER_K * k` (at least BITS_MIN) rows; on 100k WordLlama
#    rows of LoCoMo words they hold 99.99% of the exact 50 nearest (5,000: 99.87%).
# 2. Those rows' leading HEAD dimensions in int8 with one scale a row (WordLlama, like
#    OpenAI's text-embedding-3, is trained so that its leading dimensions are an embedding
#    of their own): the best `SHORTLIST_PER_K * k` (at least SHORTLIST_MIN).
# 3. The exact cosine on the full float32 rows of that shortlist.
HEAD = 128
BITS_PER_K = 200
BITS_MIN = 10_000
SHORTLIST_PER_K = 8
SHORTLIST_MIN = 2000
# Rows of HEAD values per matrix-vector product: OpenBLAS runs a large product on all
# cores, which on a small shared machine waits for busy cores.
# Wider rows go in proportionally fewer, for the same reason.
BLOCK_ROWS = 2048
# Rows gathered at a time for a shortlist's products: a small reused buffer that stays in
# cache, where `mat[rows]` wrote (and page-faulted) a fresh copy of the whole shortlist.
GATHER_ROWS = 256


def dot(mat: np.ndarray, q: np.ndarray) -> np.ndarray:
    """mat @ q in row blocks, each small enough for OpenBLAS to keep on one thread."""
    out = np.empty(mat.shape[0], dtype=np.float32)
    step = max(1, BLOCK_ROWS * HEAD // max(1, mat.shape[1]))
    for i in range(0, mat.shape[0], step):
        np.dot(mat[i : i + step], q, out=out[i : i + step])
    return out


def gather_dot(mat: np.ndarray, rows: np.ndarray | None, q: np.ndarray) -> np.ndarray:
    """mat[rows] @ q (all rows when None) as float32, in small blocks."""
    count = mat.shape[0] if rows is None else len(rows)
    out = np.empty(count, dtype=np.float32)
    raw = np.empty((GATHER_ROWS, mat.shape[1]), dtype=mat.dtype)
    buf = raw if mat.dtype == np.float32 else np.empty(raw.shape, dtype=np.float32)
    for i in range(0, count, GATHER_ROWS):
        if rows is None:
            block = mat[i : i + GATHER_ROWS]
            if buf is raw:  # contiguous float32: no copy needed
                np.dot(block, q, out=out[i : i + GATHER_ROWS])
                continue
            buf[: len(block)] = block
            size = len(block)
        else:
            r = rows[i : i + GATHER_ROWS]
            np.take(mat, r, axis=0, out=raw[: len(r)])
            if buf is not raw:
                buf[: len(r)] = raw[: len(r)]
            size = len(r)
        np.dot(buf[:size], q, out=out[i : i + GATHER_ROWS])
    return out


def sign_bits(vec: np.ndarray) -> np.ndarray:
    """The signs of a vector packed into 64-bit words (zero padded)."""
    packed = np.packbits(vec > 0)
    words = np.zeros(-(-len(packed) // 8) * 8, dtype=np.uint8)
    words[: len(packed)] = packed
    return words.view(np.uint64)


def nearest_bits(bits: np.ndarray, qbits: np.ndarray, mask: np.ndarray, count: int) -> np.ndarray:
    """Row numbers of the `count` masked-in rows of `bits` (words x rows) nearest `qbits` by
    Hamming distance, more when the last distance ties (a histogram cut, not a sort)."""
    dist = np.bitwise_count(bits[0] ^ qbits[0]).astype(np.uint16)
    for j in range(1, len(qbits)):
        dist += np.bitwise_count(bits[j] ^ qbits[j])
    far = len(qbits) * 64 + 1
    dist[~mask] = far
    cut = int(np.searchsorted(np.cumsum(np.bincount(dist, minlength=far + 1)), count))
    return np.flatnonzero(dist <= min(cut, far - 1))


class UserVectors:
    """One user's rows in preallocated arrays: adds write in place (growing by doubling),
    removes only clear an `alive` flag, so a write never copies the whole matrix."""

    def __init__(self, dim: int | None = None, capacity: int = 1024) -> None:
        self._cap = capacity
        self._dim = dim
        self.n = 0
        self._mat: np.ndarray | None = None
        self._bits: np.ndarray | None = None  # words x rows: each word's column contiguous
        self._head: np.ndarray | None = None  # the first HEAD columns in int8
        self._scale = np.zeros(capacity, dtype=np.float32)  # of each _head row
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
        assert self._mat is not None and self._head is not None and self._bits is not None
        self._mat = np.resize(self._mat, (self._cap, self._mat.shape[1]))
        self._head = np.resize(self._head, (self._cap, self._head.shape[1]))
        bits = np.zeros((self._bits.shape[0], self._cap), dtype=np.uint64)
        bits[:, : self._bits.shape[1]] = self._bits
        self._bits = bits
        for name in ("_scale", "_ids", "_layers", "_expires", "_alive"):
            old = getattr(self, name)
            new = np.zeros(self._cap, dtype=old.dtype)
            new[: len(old)] = old
            setattr(self, name, new)

    def add(self, mid: int, layer: str, expires: int, vec: np.ndarray) -> None:
        vec = np.asarray(vec, dtype=np.float32)
        bits = sign_bits(vec)
        if self._mat is None:
            self._mat = np.zeros((self._cap, vec.shape[0]), dtype=np.float32)
            self._head = np.zeros((self._cap, min(HEAD, vec.shape[0])), dtype=np.int8)
            self._bits = np.zeros((len(bits), self._cap), dtype=np.uint64)
        pos = self._pos.get(mid)
        if pos is None:
            if self.n == self._cap:
                self._grow()
            pos, self.n = self.n, self.n + 1
            self._pos[mid] = pos
        assert self._head is not None and self._bits is not None
        self._mat[pos] = vec
        self._bits[:, pos] = bits
        head = vec[: self._head.shape[1]]
        top = float(np.abs(head).max())
        self._scale[pos] = top / 127 if top > 0 else 0.0
        self._head[pos] = np.round(head * (127 / top)) if top > 0 else 0
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
        wide = max(BITS_PER_K * k, BITS_MIN)
        short = max(SHORTLIST_PER_K * k, SHORTLIST_MIN)
        head_q = q[: self._head.shape[1]] if self._head is not None else q
        if wide < n and self._bits is not None:
            rows = nearest_bits(self._bits[:, :n], sign_bits(q), mask, wide)
            if short < len(rows) and self._head is not None:
                rough = gather_dot(self._head, rows, head_q) * self._scale[rows]
                rows = rows[np.argpartition(-rough, short - 1)[:short]]
            sims = gather_dot(self._mat, rows, q)
        else:
            # Up to `wide` rows: every full row in order (no gather), exact.
            rows = np.flatnonzero(mask)
            sims = dot(self._mat[:n], q)[rows]
        k = min(k, len(rows))
        top = np.argpartition(-sims, k - 1)[:k]
        top = top[np.argsort(-sims[top])]
        return [(int(self._ids[rows[i]]), float(1.0 - sims[i])) for i in top]


class VectorCache:
    """The copies of big users' vectors, all reflecting the database's vector-index writes
    up to `generation` (db/repos/memory.generation)."""

    def __init__(self, min_rows: int = 5_000) -> None:
        self.min_rows = min_rows
        self.users: dict[int, UserVectors] = {}
        self.generation = -1  # none seen yet

    def get(self, user_id: int) -> UserVectors | None:
        return self.users.get(user_id)

    def seen(self, generation: int) -> None:
        """Before a read: the database is at `generation`; copies behind it are dropped
        (someone else wrote) and reload on use."""
        if generation != self.generation:
            self.users.clear()
            self.generation = generation

    def wrote(self, generation: int) -> bool:
        """After one of our own writes committed at `generation`: True when the copies saw
        everything before it (the caller then applies the write to them); otherwise
        another write came between, and they are dropped."""
        if generation == self.generation + 1:
            self.generation = generation
            return True
        self.clear()
        return False

    def clear(self) -> None:
        self.users.clear()
        self.generation = -1
