"""The grounding check (tools/grounding.py) on LoCoMo's own session summaries.

False rejects: each session summary checked against its session (the date line and the
turns, image captions included) — a faithful human-written summary should pass. Catch
rate: the same summaries with one invented specific appended (a name, a number, a quote,
a date, a sentence-initial name) — each should be rejected.

Usage: python bench/recall_grounding.py [--data ../shared/data/locomo_dev3.json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tools.grounding import Source, check  # noqa: E402

INVENTED = {
    "name": " They also talked about Ronaldo Figueira.",
    "number": " The trip cost 4,375 dollars.",
    "quote": ' One of them said "I will move to the coast".',
    "date": " They meet again on 3 March 2024.",
    "sentence-initial name": " Priyanka joined them later.",
}


def sessions(data: list[dict]) -> list[tuple[str, str, str]]:
    """(label, summary, source text) for every session summary in the file."""
    out = []
    for conv in data:
        c = conv["conversation"]
        for key, summary in conv.get("session_summary", {}).items():
            name = key.removesuffix("_summary")
            turns = c.get(name) or []
            lines = [c.get(f"{name}_date_time", "")]
            lines += [f"{t['speaker']}: {t['text']} {t.get('blip_caption', '')}" for t in turns]
            out.append((f"{conv.get('sample_id', '?')}/{name}", summary, "\n".join(lines)))
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument(
        "--data", type=Path, default=ROOT / ".." / "shared" / "data" / "locomo_dev3.json"
    )
    args = ap.parse_args()
    if not args.data.exists():
        print(f"LoCoMo data not found at {args.data}: nothing to measure")
        return
    rows = sessions(json.loads(args.data.read_text()))
    sources = [Source(src) for _, _, src in rows]
    rejected = [(label, check(s, src)) for (label, s, _), src in zip(rows, sources, strict=True)]
    bad = [(label, g.reason()) for label, g in rejected if not g.ok]
    print(f"session summaries: {len(rows)}, false rejects: {len(bad)} ({len(bad) / len(rows):.1%})")
    for label, reason in bad:
        print(f"  {label}: {reason}")
    for kind, extra in INVENTED.items():
        caught = sum(
            not check(s + extra, src).ok for (_, s, _), src in zip(rows, sources, strict=True)
        )
        print(f"invented {kind:<22} caught {caught}/{len(rows)}")


if __name__ == "__main__":
    main()
