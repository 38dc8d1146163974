"""MemoryStore: store, recall (hybrid), list, forget, clear a session, sweep, reindex, and
the values it hands back.

Long memories never expire, mid and short ones after MID_DAYS / SHORT_DAYS,
session ones when their session ends. Every query is scoped to one user. A recall searches
(KNN through sqlite-vec or pgvector, BM25 over the rarest query words), then ranks what it
found (tools/memory/rank.py).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from operator import itemgetter
from typing import Any

import numpy as np

from db.engine import SessionFactory, is_postgres
from tools.memory import repo
from tools.memory.embeddings import Embedder, WordLlamaEmbedder, wordllama_installed
from tools.memory.health import REINDEX_HINT, IndexStatus, index_status
from tools.memory.models import Memory
from tools.memory.pg_ddl import DEFAULT_LANGUAGE
from tools.memory.rank import RankWeights, WordVectors, fuse, matches, rerank, rescore
from tools.memory.settings import MemorySettings
from tools.memory.text import WordCounts, frame, fts_match, normalise, query_words, same_words
from tools.memory.used import pick, previous_turn
from tools.state import Kept, Key

log = logging.getLogger(__name__)

LAYERS = ("long", "mid", "short", "session")
DUP_DISTANCE = 0.15  # cosine distance under which two memories may say the same thing
# Lifetimes: a goal or plan matters for a season, recent context for two weeks (session
# summaries are short memories, so two weeks of them stay recallable).
MID_DAYS = 90
SHORT_DAYS = 14
REINDEX_BATCH = 256  # memories re-embedded per transaction
GROUP_POOL = 4  # a recall in a group searches this many times deeper (it keeps fewer)


@dataclass(frozen=True)
class StoreResult:
    id: int
    updated: bool
    replaced: int | None = None  # the memory this one superseded (kept as its history)
    # Older memories of its layer and category in the same frame (text.frame) that it may
    # contradict: (id, content), for the model to decide.
    rivals: tuple[tuple[int, str], ...] = ()


@dataclass(frozen=True)
class Former:
    """What a memory said before a newer one replaced it, and when that happened."""

    content: str
    since: datetime  # when it was first stored
    until: datetime  # when it was replaced

    def line(self) -> str:
        return f"{self.content} ({self.since:%Y-%m-%d} – {self.until:%Y-%m-%d})"


@dataclass(frozen=True)
class MemoryHit:
    id: int
    layer: str
    content: str
    category: str | None
    certainty: float
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    relevance: float | None
    session_id: int | None
    session_name: str | None
    session_started: datetime | None
    message_id: int | None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "id": self.id,
            "layer": self.layer,
            "content": self.content,
            "category": self.category,
            "certainty": round(self.certainty, 2),
            "created_at": self.created_at.isoformat(timespec="minutes"),
        }
        if self.relevance is not None:
            out["relevance"] = round(self.relevance, 3)
        if self.session_name:
            out["source"] = self.source()
        return out

    def source(self) -> str:
        if not self.session_name:
            return "unknown session"
        when = self.session_started.strftime("%Y-%m-%d") if self.session_started else ""
        return (
            f"{self.session_name} ({when})"
            if when and when not in self.session_name
            else (self.session_name)
        )


@dataclass(frozen=True)
class MemoryPage:
    items: list[MemoryHit]
    total: int


def hit(r: repo.MemoryRow, relevance: float | None = None) -> MemoryHit:
    m = r.memory
    return MemoryHit(
        m.id,
        m.layer,
        m.content,
        m.category,
        m.certainty,
        m.created_at,
        m.updated_at,
        m.expires_at,
        relevance,
        m.session_id,
        r.session_name,
        r.session_started,
        m.message_id,
    )


class MemoryStore:
    def __init__(
        self,
        session_factory: SessionFactory,
        embedder: Embedder,
        settings: MemorySettings,
        clock: Callable[[], datetime],
        weights: RankWeights | None = None,
    ) -> None:
        self._sf = session_factory
        self.embedder = embedder
        self._settings = settings
        self._clock = clock
        self.weights = weights or RankWeights()
        # Without given weights, the word-match stage runs on SQLite only: its weight was
        # chosen on SQLite's BM25 scores, and PostgreSQL's ts_rank spreads them wider, so the
        # same weight there overturned a date match (tests/test_memory_ranking.py) until it
        # is measured there.
        self._words_on_pg = weights is not None
        self._vectors: bool | None = None  # None: not checked yet
        self._write_lock = asyncio.Lock()
        self._counts: dict[int, int] = {}  # memories per user, counted once, then tracked
        # Users seen with no live memory: auto-recall's first read is skipped for them (most
        # messages of a user who never stored one); a store here clears the mark at once.
        self._empty: Kept[bool] = Kept()
        self._total: int | None = None  # memories of all users, likewise
        self.words = WordCounts()  # BM25 keeps the rarest query words (text.py)
        # The word-match stage's word vectors: always from the static embedder (a word's
        # vector is a table lookup), whichever embedder makes the memories' vectors.
        self.word_vectors = word_vectors(embedder)

    # -- index health -------------------------------------------------------------------

    async def index_status(self) -> IndexStatus:
        """Whether the stored vectors were made by the configured embedder."""
        status = await index_status(self._sf, self.embedder, DEFAULT_LANGUAGE)
        self._vectors = status.ok
        return status

    async def _vectors_ok(self) -> bool:
        if self._vectors is None:
            status = await self.index_status()
            if not status.ok:
                log.warning("memory index %s; recall uses words only", status.detail)
        return bool(self._vectors)

    async def _embed(self, text: str) -> np.ndarray | None:
        """One embedding, or None when vectors are off or the embedder failed."""
        if not await self._vectors_ok():
            return None
        try:
            vectors: np.ndarray = await self.embedder.embed([text])
            return vectors[0]  # type: ignore[no-any-return]
        except Exception as exc:
            log.warning("embedding failed (%s); memory uses words only for now", exc)
            return None

    async def _fit(self, s: Any, vec: np.ndarray | None) -> bytes | None:
        """The vector as stored bytes, or None when the index has another dimension."""
        if vec is None:
            return None
        dim = await repo.vec_dim(s)
        if dim != vec.shape[0]:
            if await repo.count_vectors(s) == 0:
                await repo.recreate_vec(s, int(vec.shape[0]))
            else:
                log.warning(
                    "embedding has %d dimensions, index %s: %s", vec.shape[0], dim, REINDEX_HINT
                )
                self._vectors = False
                return None
        return vec.astype(np.float32).tobytes()

    # -- writes ---------------------------------------------------------------------------

    def expiry(self, layer: str, now: datetime) -> datetime | None:
        if layer == "mid":
            return now + timedelta(days=MID_DAYS)
        if layer == "short":
            return now + timedelta(days=SHORT_DAYS)
        return None

    async def store(
        self,
        *,
        user_id: int,
        layer: str,
        content: str,
        category: str | None = None,
        certainty: float = 1.0,
        session_id: int | None = None,
        message_id: int | None = None,
        replaces: int | None = None,
    ) -> StoreResult:
        """Store a memory, or update a nearly identical one of the same user and layer.
        `replaces`: the id of a memory of the user's this one corrects or contradicts; that
        one stays as this one's history (history()) and leaves recall. The memory keeps the
        chat it was said in (its source session's), so a group reads only its own."""
        self._empty.forget(user_id)
        if layer not in LAYERS:
            raise ValueError(f"unknown layer {layer!r}")
        content = normalise(content)
        if not content:
            raise ValueError("empty content")
        if layer == "session" and session_id is None:
            raise ValueError("a session memory needs a session")
        certainty = max(0.0, min(float(certainty), 1.0))
        now = self._clock()
        vec = await self._embed(content)
        # One write at a time: parallel tool calls storing the same fact would each miss
        # the other's uncommitted row and both insert.
        async with self._write_lock, self._sf() as s, s.begin():
            emb = await self._fit(s, vec)
            chat = await repo.source_chat(s, session_id, message_id)
            twin = await self._twin(s, user_id, layer, content, vec if emb else None, session_id)
            if twin is not None and twin.chat_id != chat:
                twin = None  # said in another chat: each keeps its own
            if twin is not None:
                twin.content = content
                twin.certainty = certainty
                twin.category = category or twin.category
                twin.updated_at = now
                twin.expires_at = self.expiry(layer, now)
                await repo.replace(s, twin, emb)
                result, memory = StoreResult(twin.id, True), twin
            else:
                result, memory = await self._insert(
                    s,
                    emb,
                    user_id=user_id,
                    layer=layer,
                    content=content,
                    category=category,
                    certainty=certainty,
                    session_id=session_id,
                    message_id=message_id,
                    chat_id=chat,
                    now=now,
                )
            if replaces is not None and await repo.supersede(s, user_id, replaces, result.id, now):
                result = StoreResult(result.id, result.updated, replaces)
                log.info("memory #%d superseded by #%d", replaces, result.id)
            elif replaces is None and category and (lead := frame(content)) is not None:
                found = await repo.rivals(s, memory, lead, now)
                result = StoreResult(result.id, result.updated, None, _rivals(found))
        self._counted(memory.user_id)
        if result.updated:
            self._counts[user_id] -= 1  # not one more memory after all
            if self._total is not None:
                self._total -= 1
        return result

    async def _insert(
        self,
        s: Any,
        emb: bytes | None,
        *,
        user_id: int,
        layer: str,
        content: str,
        category: str | None,
        certainty: float,
        session_id: int | None,
        message_id: int | None,
        chat_id: int | None,
        now: datetime,
    ) -> tuple[StoreResult, Memory]:
        memory = Memory(
            user_id=user_id,
            layer=layer,
            content=content,
            category=category,
            certainty=certainty,
            session_id=session_id,
            message_id=message_id,
            chat_id=chat_id,
            created_at=now,
            updated_at=now,
            expires_at=self.expiry(layer, now),
        )
        return StoreResult(await repo.insert(s, memory, emb), False), memory

    def _counted(self, user_id: int) -> None:
        """Keep the counts BM25 reads in step with a committed write."""
        self._counts[user_id] = self._counts.get(user_id, 0) + 1
        if self._total is not None:
            self._total += 1
        self.words.note_writes()

    async def _twin(
        self,
        s: Any,
        user_id: int,
        layer: str,
        content: str,
        vec: np.ndarray | None,
        session_id: int | None,
    ) -> Memory | None:
        """An existing memory saying (nearly) the same thing, if any."""
        twin = None
        if vec is None:  # without vectors, at least exact repeats are caught
            twin = await repo.exact(s, user_id, layer, content.lower())
        else:
            near = await self._knn(s, user_id, vec, 3, layer)
            for mid, dist in near:
                if dist > DUP_DISTANCE:
                    break
                cand = await repo.get(s, user_id, mid)
                if cand is not None and same_words(cand.content, content):
                    twin = cand
                    break
        if twin is not None and layer == "session" and twin.session_id != session_id:
            return None
        return twin

    async def forget(self, *, user_id: int, memory_id: int) -> bool:
        async with self._sf() as s, s.begin():
            if await repo.get(s, user_id, memory_id) is None:
                return False
            gone = await repo.delete_ids(s, [memory_id]) > 0
        self.words.note_writes()
        return gone

    async def edit(self, *, user_id: int, memory_id: int, content: str) -> bool:
        """The person's correction of one of their memories: new text, same layer and
        origin, re-indexed. False: no such memory of theirs."""
        content = normalise(content)
        if not content:
            raise ValueError("empty content")
        vec = await self._embed(content)
        async with self._write_lock, self._sf() as s, s.begin():
            memory = await repo.get(s, user_id, memory_id)
            if memory is None:
                return False
            memory.content = content
            memory.updated_at = self._clock()
            await repo.replace(s, memory, await self._fit(s, vec))
        self.words.note_writes()
        return True

    async def pin(self, *, user_id: int, memory_id: int) -> bool:
        """The person's word that one of their memories is for good: moved to the long
        layer, no expiry, re-indexed under it. False: no such memory of theirs."""
        found = await self.get(user_id=user_id, memory_id=memory_id)
        if found is None:
            return False
        if found.layer == "long":
            return True
        vec = await self._embed(found.content)
        async with self._write_lock, self._sf() as s, s.begin():
            memory = await repo.get(s, user_id, memory_id)
            if memory is None:
                return False
            memory.layer, memory.expires_at = "long", None
            memory.updated_at = self._clock()
            await repo.replace(s, memory, await self._fit(s, vec))
        self.words.note_writes()
        return True

    async def clear_session(self, *, user_id: int, session_id: int) -> int:
        """Drop the session-layer memories of one session (it ended)."""
        async with self._sf() as s, s.begin():
            ids = await repo.session_ids(s, user_id, session_id)
            n = await repo.delete_ids(s, ids)
        self.words.note_writes(len(ids))
        return n

    async def sweep(self, now: datetime | None = None) -> int:
        """Delete expired memories and session memories of ended sessions."""
        async with self._sf() as s, s.begin():
            ids = await repo.expired_ids(s, now or self._clock())
            n = await repo.delete_ids(s, ids)
        self.words.note_writes(len(ids))
        return n

    # -- reads ----------------------------------------------------------------------------

    async def get(self, *, user_id: int, memory_id: int) -> MemoryHit | None:
        async with self._sf() as s:
            found = await repo.rows(s, user_id, [memory_id], self._clock())
        return hit(found[0]) if found else None

    async def page(
        self,
        *,
        user_id: int,
        layer: str | None = None,
        offset: int = 0,
        limit: int = 10,
        group: int | None = None,
    ) -> MemoryPage:
        """`group`: only what was said in that group (None: every chat of the user's)."""
        async with self._sf() as s:
            found, total = await repo.page(
                s, user_id, layer, self._clock(), max(offset, 0), max(1, min(limit, 100)), group
            )
        return MemoryPage([hit(r) for r in found], total)

    async def known(
        self, *, user_id: int, limit: int, group: int | None = None
    ) -> tuple[bool, list[repo.Facts]]:
        """Whether the user has a live memory (said in `group`, when given), and up to
        `limit` of their long-term ones, most certain and most recent first: one read (rows
        as read, repo.Facts) of at most `limit` + 1 rows, whatever the user has; auto-recall
        asks for every message."""
        if group is None and self._empty.get(user_id):
            return False, []
        async with self._sf() as s:
            found = await repo.known(s, user_id, self._clock(), limit, group)
        if group is not None:
            return found
        if found[0]:
            self._empty.forget(user_id)
        else:
            self._empty.put(user_id, True)
        return found

    async def last_used(
        self, *, user_id: int, session_id: int, before_message_id: int
    ) -> MemoryHit | None:
        """The live memory the session's previous answer used (tools/memory/used.py), or
        None when it used none."""
        async with self._sf() as s:
            turn = await previous_turn(s, session_id, before_message_id)
            if turn is None:
                return None
            found = await repo.rows(s, user_id, [*turn.stored, *turn.recalled], self._clock())
        by_id = {r.memory.id: r for r in found}
        mid = pick(turn, {i: r.memory.content for i, r in by_id.items()})
        return hit(by_id[mid]) if mid is not None else None

    async def history(
        self, *, user_id: int, ids: Sequence[int], group: int | None = None
    ) -> dict[int, list[Former]]:
        """What each of these memories replaced, oldest first (followed back through every
        earlier replacement); with `group`, only what was said in that group."""
        out: dict[int, list[Former]] = {}
        async with self._sf() as s:
            heads = {i: i for i in ids}  # each replaced memory's newest successor asked for
            wave = list(ids)
            while wave:
                older = await repo.replaced(s, user_id, wave, group)
                wave = []
                for m in older:
                    head = heads[m.superseded_by or 0]
                    heads[m.id] = head
                    until = m.superseded_at or m.updated_at
                    out.setdefault(head, []).append(Former(m.content, m.created_at, until))
                    wave.append(m.id)
        for formers in out.values():
            formers.sort(key=lambda f: f.until)
        return out

    async def recall(
        self,
        *,
        user_id: int,
        query: str,
        layers: Sequence[str] | None = None,
        limit: int = 10,
        session_id: int | None = None,
        group: int | None = None,
    ) -> list[MemoryHit]:
        """The user's live memories most relevant to `query`, best first.

        Session memories of other sessions than `session_id` (when given) are left out, and
        with `group` every memory not said in that group."""
        limit = max(1, min(limit, 100))
        query = normalise(query)
        if not query:
            return []
        wanted = [x for x in LAYERS if x in layers] if layers else list(LAYERS)
        # A group's memories are a few among the user's: a deeper pool before they are kept.
        pool = max(50, limit * 3) * (GROUP_POOL if group is not None else 1)
        now = self._clock()
        w = self.weights
        # A half weighted 0 is not searched at all (words only, meaning only).
        embedding = None
        if w.vector > 0 and await self._vectors_ok():
            embedding = asyncio.ensure_future(self._embed(query))
        terms = query_words(query) if w.bm25 > 0 else []
        async with self._sf() as s:
            bm_hits, vec_hits = await self._search(s, user_id, terms, embedding, pool, wanted, now)
            scores = fuse(bm_hits, vec_hits, w)
            ranked, facts = await rerank(
                s, user_id, query, scores, now, wanted, session_id, w, limit, group
            )
            use_words = w.word_match > 0 and (self._words_on_pg or not is_postgres(s))
        if use_words and self.word_vectors is not None and len(ranked) > 1:
            ranked = await self._word_match(query, ranked, facts, w)
        ranked = ranked[:limit]
        top = ranked[0][1] if ranked else 1.0
        # Every ranked memory's row came with its facts (alive, this user's): no second read.
        found = [hit(repo.row_of(facts[mid]), score / top if top else 0.0) for mid, score in ranked]
        return prefer_newer(found)

    async def _word_match(
        self,
        query: str,
        ranked: list[tuple[int, float]],
        facts: dict[int, repo.Facts],
        w: RankWeights,
    ) -> list[tuple[int, float]]:
        """The best `w.word_match_top` in the word-match stage's order, the rest after them
        (tools/memory/rank.py); the order as it was if the word vectors fail."""
        assert self.word_vectors is not None
        head = [facts[m].content for m, _ in ranked[: w.word_match_top]]
        try:
            match = await matches(self.word_vectors, query, head)
        except Exception as exc:
            log.warning("word match failed (%s); recall keeps the fused order", exc)
            return ranked
        return rescore(ranked, match, w.word_match)

    # -- the search phase of a recall -----------------------------------------------------

    async def _search(
        self,
        s: Any,
        user_id: int,
        terms: list[str],
        embedding: asyncio.Future[np.ndarray | None] | None,
        pool: int,
        wanted: list[str],
        now: datetime,
    ) -> tuple[list[tuple[int, float]], list[tuple[int, float]]]:
        """BM25 hits of the terms and KNN hits of the query's vector (being made), `pool`
        of each, in one statement (repo.search): BM25 over the rarest query words, unscoped
        for a user who owns most of the index (exact when it yields `pool` rows or read all
        the index's matches, see repo.bm25, else asked again scoped); KNN over the wanted
        layers (one search when they are all wanted), nearest first."""
        match = fts_match(await self._rarest(s, user_id, terms)) if terms else None
        scoped = match is None or self._counts[user_id] * 2 < max(self._total or 0, 1)
        emb = None
        if embedding is not None and (vec := await embedding) is not None and self._vectors:
            emb = vec.astype(np.float32).tobytes()
        layers = [None] if len(wanted) == len(LAYERS) else wanted
        near, bm_hits, complete = await repo.search(
            s, user_id, emb, layers, match, pool, wanted, now, scoped
        )
        if match is not None and not complete:
            bm_hits = (await repo.bm25(s, user_id, match, pool, wanted, now))[0]
        return bm_hits, sorted(near, key=itemgetter(1))

    async def _knn(
        self, s: Any, user_id: int, vec: np.ndarray, k: int, layer: str | None
    ) -> list[tuple[int, float]]:
        return await repo.knn(s, user_id, vec.astype(np.float32).tobytes(), k, layer, self._clock())

    async def _rarest(self, s: Any, user_id: int, terms: list[str]) -> list[str]:
        """The rarest of the query's words (text.WordCounts), with the counts that decide
        whether BM25 is scoped to the user read first."""
        if user_id not in self._counts:
            self._counts[user_id] = await repo.count_user(s, user_id)
        if self._total is None:
            self._total = await repo.count_all(s)
        return await self.words.keep(s, terms, self._total)

    # -- maintenance ----------------------------------------------------------------------

    async def reindex(
        self, progress: Callable[[int, int], None] | None = None, mark: str | None = None
    ) -> int:
        """Re-embed every memory with the configured embedder and rebuild both indexes: the
        vector table is rebuilt at the embedder's dimension and refilled batch by batch, and
        the embedder's name recorded. `mark`: a memory_meta key each batch writes its
        progress to ("<done>/<total> <embedder>"), emptied at the end. Returns how many
        memories were embedded."""
        async with self._sf() as s:
            total = await repo.count_all(s)
        done, after, dim = 0, 0, None
        while True:
            async with self._sf() as s, s.begin():
                batch = await repo.batch_after(s, after, REINDEX_BATCH)
                if not batch:
                    break
                vecs = await self.embedder.embed([m.content for m in batch])
                if dim is None:
                    dim = int(vecs.shape[1])
                    await repo.recreate_vec(s, dim)
                for m, v in zip(batch, vecs, strict=True):
                    await repo.replace(s, m, v.astype(np.float32).tobytes())
                after = batch[-1].id
                done += len(batch)
                if mark:
                    await repo.set_meta(s, {mark: f"{done}/{total} {self.embedder.name}"})
            if progress:
                progress(done, total)
        async with self._sf() as s, s.begin():
            if dim is None:
                probe = await self.embedder.embed(["probe"])
                await repo.recreate_vec(s, int(probe.shape[1]))
            await repo.set_meta(s, {"model": self.embedder.name, **({mark: ""} if mark else {})})
        self._vectors = True
        return done


def _rivals(found: list[Memory]) -> tuple[tuple[int, str], ...]:
    return tuple((m.id, m.content) for m in found)


def prefer_newer(hits: list[MemoryHit]) -> list[MemoryHit]:
    """Of two long or mid facts of one category in the same frame (text.frame) that say
    different things, the newer one first, where it is found at all: it is likelier to be
    what holds now ("Lives in Lisbon" after "Lives in Porto" when the older one was not
    marked as replaced)."""
    out = list(hits)
    for j in range(1, len(out)):
        h = out[j]
        if h.layer not in ("long", "mid") or not h.category or (lead := frame(h.content)) is None:
            continue
        for i in range(j):
            o = out[i]
            if (
                o.layer == h.layer
                and o.category == h.category
                and o.created_at < h.created_at
                and o.content.lower() != h.content.lower()
                and frame(o.content) == lead
            ):
                out.insert(i, out.pop(j))
                break
    return out


def word_vectors(embedder: Embedder) -> WordVectors | None:
    """The word-match stage's vectors: the embedder's own when it is WordLlama, else
    WordLlama's when its wheel is installed (it is a run dependency), else none."""
    if isinstance(embedder, WordLlamaEmbedder):
        return WordVectors(embedder.embed)
    if wordllama_installed():
        return WordVectors(WordLlamaEmbedder().embed)
    return None


MEMORY: Key[MemoryStore] = Key("memory.store")
