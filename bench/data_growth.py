"""Does a plain message cost more as a user's data grows? (issue 44: "keep it flat as data
grows"; a 25-minute soak cost 54-72 ms a message on an empty database, 84-103 ms on its
final one.)

For each size: a fresh database gets `--memories N` memories of one user (LoCoMo's words
when ../shared/data/locomo_dev3.json is there, embedded by WordLlama, through the memory
repository's statements as bench/recall_speed.py fills them), then Sidekick (`python -m bot`,
the assembled app its real builder makes) starts on it against the fake Bot API and fake
model (tests/fakes) and answers `--history` messages of that user (they make its chat
history), then `--timed` more, one at a time; the bot process's CPU time (/proc: user +
system, all threads) over the timed ones, per message, is the figure. Each message is a
sentence of the same words, so auto-recall searches for real; each answer comes in one
delta at once (the per-message cost, not the stream's; see bench/vs_plain.py).

`--base REV` measures that commit's tree (git archive into a temp folder, run with the same
venv) beside this one (or `--head REV`'s, so the checkout may change meanwhile) on copies of
the same filled database, in alternated rounds, so a change is measured before/after under
the same machine load; the median of `--rounds`.

Usage: python bench/data_growth.py [--sizes 0,2000,10000] [--history 0] [--timed 60]
                                   [--base REV] [--head REV] [--rounds 3] [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import os
import random
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from recall_speed import corpus_words  # noqa: E402
from startup import PollClock, cpu_s  # noqa: E402
from vs_plain import env_for  # noqa: E402

from tests.fakes.openai_server import FakeOpenAI, Text  # noqa: E402
from tests.fakes.telegram_server import message_update  # noqa: E402

USER = 1000
WARM_UP = 5
DATA = ROOT / ".." / "shared" / "data" / "locomo_dev3.json"


# Run with the measured tree's own code (its migrations make the database it reads).
FILL = """
import asyncio, sys
from pathlib import Path
from recall_common import T0, open_db
from recall_speed import bulk_fill, corpus_words
from db.repos import core
from tools.memory.embeddings import WordLlamaEmbedder

async def fill(home, memories, data):
    engine, sf, _ = await open_db(home / "data")
    try:
        async with sf() as s, s.begin():
            user = await core.get_or_create_user(s, int(sys.argv[4]), "Bench", T0)
        if memories:
            vocab = corpus_words(data)
            await bulk_fill(sf, WordLlamaEmbedder(), [user.id], memories, 1, vocab)
    finally:
        await engine.dispose()

asyncio.run(fill(Path(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3])))
"""


def fill(tree: Path, home: Path, memories: int) -> None:
    """A database in `home` made by the tree's migrations, with `memories` memories of the
    user (the same ones for every tree: a fixed seed)."""
    path = f"{tree}:{tree / 'bench'}"
    subprocess.run(
        [sys.executable, "-c", FILL, str(home), str(memories), str(DATA.resolve()), str(USER)],
        cwd=tree, env={**os.environ, "PYTHONPATH": path}, check=True,
    )  # fmt: skip


ANSWER = "Sure, noted. Anything else?"


def respond(body: dict) -> Text:
    """The fake model's turn: the chat's answer, or for a summary of a long session's oldest
    turns (bot/sessions/history.py WRITE) one drawn from the person's own words, as a real
    model's is: the chat answer as a summary names "Sure", which the turns do not, so every
    summary was rejected and the bench measured the retry path of a failing model on every
    message instead of one summary in STEP_TURNS turns."""
    system = body["messages"][0].get("content") or ""
    if not system.startswith("You compress"):
        return Text(ANSWER, chunk=len(ANSWER))
    said = [line.split("User: ", 1)[1] for line in body["messages"][1]["content"].splitlines()
            if "User: " in line]  # fmt: skip
    text = "the user asked: " + " ".join(said[:3])[:300]
    return Text(text, chunk=len(text))


async def measure(root: Path, home: Path, history: int, timed: int, vocab: list[str],
                  profile: Path | None, size: int) -> float:  # fmt: skip
    """CPU ms per timed message of the bot of the tree at `root` on the database in `home`."""
    tg = PollClock()
    tg._next_update = itertools.count(1)
    tg = await tg.start()
    llm = await FakeOpenAI(responder=respond).start()
    rng = random.Random(3)
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", cwd=root, env=env_for(home, tg, llm, 1),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    spy = None
    try:
        t0 = time.time()
        while not tg.poll_starts:
            if proc.returncode is not None or time.time() - t0 > 120:
                err = (await proc.stderr.read()).decode() if proc.stderr else ""
                raise RuntimeError(f"the bot did not start polling:\n{err[-1500:]}")
            await asyncio.sleep(0.01)
        cpu0 = 0.0
        total = WARM_UP + history + timed
        for i in range(total):
            if i == WARM_UP + history:
                if profile is not None:
                    spy = await asyncio.create_subprocess_exec(
                        str(Path(sys.executable).with_name("py-spy")), "record", "--pid",
                        str(proc.pid), "--format", "raw", "--rate", "400", "--threads",
                        "--nonblocking", "--output", str(profile / f"{size}-{home.name}.txt"),
                        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
                    )  # fmt: skip
                    await asyncio.sleep(0.5)
                cpu0 = cpu_s(proc.pid)
            text = " ".join(rng.choice(vocab) for _ in range(rng.randint(6, 14)))
            before = sum(m.method == "sendMessage" for m in tg.messages)
            await tg.push(message_update(USER, text.capitalize() + "?", message_id=i + 1))
            await tg.wait_for(
                lambda n=before: sum(m.method == "sendMessage" for m in tg.messages) > n,
                timeout=120,
            )
        cpu = (cpu_s(proc.pid) - cpu0) / timed
    finally:
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            await spy.wait()
        if proc.returncode is None:
            proc.terminate()
        _, err = await proc.communicate()
        await tg.stop()
        await llm.stop()
    if b"Traceback" in err:
        print(err.decode()[-1500:], file=sys.stderr)
    return cpu * 1000


def export(rev: str, into: Path) -> Path:
    """The tree of commit `rev` in a folder of its own."""
    into.mkdir()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", rev], capture_output=True, check=True
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=archive, check=True)
    return into


async def run(sizes: list[int], history: int, timed: int, base: str | None, head: str | None,
              rounds: int, profile: Path | None) -> None:  # fmt: skip
    vocab = corpus_words(DATA)
    with tempfile.TemporaryDirectory() as other:
        trees = {head: export(head, Path(other) / "head")} if head else {"this tree": ROOT}
        if base:
            trees = {base: export(base, Path(other) / "base"), **trees}
        for size in sizes:
            with tempfile.TemporaryDirectory() as d:
                t0 = time.perf_counter()
                templates = {}
                for name, tree in trees.items():
                    templates[name] = Path(d) / f"filled-{len(templates)}"
                    templates[name].mkdir()
                    fill(tree, templates[name], size)
                filled = (time.perf_counter() - t0) / len(trees)
                got: dict[str, list[float]] = {name: [] for name in trees}
                for r in range(rounds):
                    for name in list(trees) if r % 2 == 0 else list(reversed(trees)):
                        home = Path(d) / f"run-{r}-{len(got[name])}-{name.replace(' ', '')}"
                        shutil.copytree(templates[name], home)
                        got[name].append(
                            await measure(trees[name], home, history, timed, vocab, profile, size)
                        )
                        shutil.rmtree(home)
                line = "  ".join(
                    f"{name}: {statistics.median(v):5.1f} ({' '.join(f'{x:.1f}' for x in v)})"
                    for name, v in got.items()
                )
                print(
                    f"{size:>7} memories, {history:>4} earlier messages: CPU ms/msg, median "
                    f"of {rounds} x {timed} messages: {line}  (filled in {filled:.0f} s, load "
                    f"{os.getloadavg()[0]:.1f})",
                    flush=True,
                )


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", default="0,2000,10000", help="memories of the user, per run")
    p.add_argument("--history", type=int, default=0, help="messages before the timed ones")
    p.add_argument("--timed", type=int, default=60)
    p.add_argument("--base", metavar="REV", help="also measure this commit's tree")
    p.add_argument("--head", metavar="REV", help="measure this commit's tree, not the checkout")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--profile", type=Path, metavar="DIR", help="py-spy the timed part")
    args = p.parse_args()
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
    sizes = [int(x) for x in args.sizes.split(",")]
    asyncio.run(
        run(sizes, args.history, args.timed, args.base, args.head, args.rounds, args.profile)
    )


if __name__ == "__main__":
    main()
