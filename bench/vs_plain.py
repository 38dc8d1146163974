"""Sidekick side by side with a plain aiogram + openai SDK + SQLite bot (bench/plain_bot.py:
the SDK streaming each answer, one SQLite row per message, nothing else), both as real
processes against the same local fakes (tests/fakes: Bot API, OpenAI API), in alternated
rounds in one run, so both see the same machine load. Sidekick is `python -m bot`: the
assembled app its real builder makes, with its defaults. Both do what a user gets from them:

- the model streams every answer as a real server does: ANSWER in `--chunks` deltas with
  `--gap` seconds between them (default 40 x 25 ms, about 1 s: 40 tokens/s);
- both show drafts (sendMessageDraft) at the same interval while an answer streams and send
  the answer once at the end; the figures wait for that message;
- one chat's messages are answered in order, chats concurrently (both bots).
- each bot keeps its database over the rounds, so a burst chat's history grows by
  `--messages` turns a round, as a user's conversation does (per-round lines show the trend).

Per bot and round:

- start: process start -> first getUpdates, on a database an untimed first start made;
- one-chat latency: `--latency` messages one at a time in one chat, push -> answer, p50;
- burst: `--chats` chats x `--messages` messages pushed at once, messages/s until the last
  answer;
- CPU seconds per message of the bot process (/proc: user + system of all its threads, the
  figure time.process_time gives inside it) over the latency run and the burst (steadier
  than wall time under load). Each part's CPU is read once the bot has settled (`settle`):
  what a part's messages set off after their answers were sent (a done mark, a summary of a
  long session written in the background) is counted in that part, not in the next one's
  figure. With 40 deltas a second both bots spend most of it waking for each delta, so then:
- instant: `--instant` messages pushed at once over the chats, each answer in one delta at
  once: the CPU per message without the stream's wake-ups, the per-message cost the two
  bots differ in (issue 44's ratio), messages/s, and model calls per message (above one:
  Sidekick summarising a long session's oldest turns, which the later rounds' longer
  chats need and the first round's mostly do not: why Sidekick's figure rises by round).
  The fake model answers a summary request as a model does, with a summary in the
  person's own words (`summary`), so Sidekick keeps it; Sidekick's summaries kept and
  rejected are printed each round (a rejected one is asked for twice and never shortens
  the prompts after it, which no real model's summary would cost);
- RSS of the bot process after the burst.

Printed: each round, then the median over rounds of each figure and Sidekick's ratio to the
plain bot (a ratio <= 1 is better for every figure but messages/s). `--profile DIR` samples
each bot with py-spy (into the venv: pip install py-spy) over the streamed part and the
instant part apart, into DIR/<bot>-<streamed|instant>-<round>.txt (collapsed stacks).

Usage: python bench/vs_plain.py [--rounds 5] [--quick] [--chats 4] [--messages 50]
                                [--latency 10] [--chunks 40] [--gap 0.025] [--instant 200]
                                [--profile DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import re
import signal
import sqlite3
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from startup import PollClock, cpu_s, rss_mb  # noqa: E402

from bot.sessions.history import WRITE  # noqa: E402
from tests.fakes.openai_server import FakeOpenAI, Text  # noqa: E402
from tests.fakes.telegram_server import message_update  # noqa: E402

WARM_UP = 3  # one-chat messages before the timed ones (first-use imports, caches)
# A short answer of the kind an assistant gives (about 200 characters, 5 a delta).
ANSWER = (
    "Sure. Tomorrow looks clear in the morning with some clouds after noon, around 18 "
    "degrees. If you go out in the evening take a light jacket; rain is possible after "
    "eight. Anything else you want me to check for you?"
)


@dataclass
class Bot:
    proc: asyncio.subprocess.Process
    start: float  # seconds from process start to its first getUpdates


@dataclass
class Load:
    chats: int
    messages: int
    latency: int
    chunks: int
    gap: float
    instant: int


BOTS = {
    "sidekick": [sys.executable, "-m", "bot"],
    "plain": [sys.executable, str(ROOT / "bench" / "plain_bot.py")],
}
USER = 1000  # the one-chat latency run's chat; the burst's chats are USER + 1 ...


def env_for(tmp: Path, tg: PollClock, llm: FakeOpenAI, chats: int) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "DATA_DIR": str(tmp / "data"),
        "DB_PATH": str(tmp / "plain.db"),
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_URL": tg.base_url,
        "ALLOWED_USER_IDS": ",".join(str(USER + i) for i in range(chats + 1)),
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_MODEL": "fake-model",
        "LOG_LEVEL": "WARNING",
    }


# Every answer is its own, as a model's are: Sidekick asks a model again when it gives a
# different message an answer word for word an earlier one got (bot/agent/markup.py copies),
# which would make every message here two model calls.
_NUMBER = itertools.count(1)


def answer() -> str:
    return f"{ANSWER} (answer {next(_NUMBER)})"


# A summary request (bot/sessions/history.py WRITE) lists the turns one a line, the person's
# as "<day> User: <text>"; the earlier summary it continues comes before them.
_SAID = re.compile(r"^(?:\d{4}-\d\d-\d\d )?User: (.+)$", re.M)
QUOTED = 8  # of the person's messages a summary names


def summary(body: dict) -> Text | None:  # type: ignore[type-arg]
    """A real summary of the turns a summary request gives (None for any other request),
    as a model writes one: in the person's own words, so Sidekick's check accepts it as it
    accepts a real model's (the canned answer states what nobody said and is rejected,
    which would make every summary two calls and no summary ever kept)."""
    messages = body.get("messages") or []
    turns = messages[-1].get("content") if messages else None
    if body.get("stream") or not isinstance(turns, str) or not turns.startswith(WRITE.lead):
        return None
    said = list(dict.fromkeys(_SAID.findall(turns)))
    if len(said) > QUOTED:
        said = said[: QUOTED // 2] + said[-QUOTED // 2 :]
    quoted = ", ".join(f'"{s.strip()}"' for s in said)
    return Text(f"The user wrote short messages, among them {quoted}. Sidekick answered each.")


def summaries(home: Path) -> tuple[int, int]:
    """Sidekick's summaries of long sessions so far in its database: (kept, rejected);
    none for the plain bot, which has no such thing."""
    db = home / "data" / "sidekick.db"
    if not db.exists():
        return 0, 0
    with contextlib.closing(sqlite3.connect(db)) as c:
        got = dict(c.execute("select verified, count(*) from session_compressions group by 1"))
    return got.get(1, 0), got.get(0, 0)


def streamed(load: Load) -> Text:
    """An answer in `load.chunks` deltas, `load.gap` seconds apart."""
    text = answer()
    size = -(-len(text) // load.chunks)
    return Text(text, chunk=size, delay=load.gap)


async def start(name: str, home: Path, tg: PollClock, llm: FakeOpenAI, chats: int) -> Bot:
    """Starts a bot process; returns it with the seconds until its first getUpdates."""
    t0 = time.time()
    proc = await asyncio.create_subprocess_exec(
        *BOTS[name], cwd=ROOT, env=env_for(home, tg, llm, chats),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    while not tg.poll_starts:
        if proc.returncode is not None or time.time() - t0 > 120:
            _, err = await proc.communicate()
            raise RuntimeError(f"{name} did not start polling:\n{err.decode()[-1500:]}")
        await asyncio.sleep(0.005)
    return Bot(proc, tg.poll_starts[0] - t0)


async def stop(name: str, bot: Bot) -> None:
    bot.proc.terminate()
    _, err = await bot.proc.communicate()
    if b"Traceback" in err:
        print(f"{name} stderr:\n{err.decode()[-1500:]}", file=sys.stderr)


PROFILE: Path | None = None  # --profile DIR


async def profile_start(name: str, pid: int, base: int) -> asyncio.subprocess.Process | None:
    """py-spy attached to the bot over the timed part (--profile): DIR/<bot>-<round>.txt in
    py-spy's raw (collapsed stacks) format, every thread, idle stacks left out."""
    if PROFILE is None:
        return None
    out = PROFILE / f"{name}-{base // 100_000}.txt"
    spy = Path(sys.executable).with_name("py-spy")
    proc = await asyncio.create_subprocess_exec(
        str(spy), "record", "--pid", str(pid), "--format", "raw", "--rate", "400",
        "--threads", "--nonblocking", "--output", str(out),
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL,
    )  # fmt: skip
    await asyncio.sleep(0.5)  # attached before the first timed message
    return proc


async def profile_stop(spy: asyncio.subprocess.Process | None) -> None:
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        await spy.wait()


SETTLE_WINDOW_S = 0.3
SETTLE_MAX_S = 60.0


async def settle(pid: int) -> float:
    """The bot's CPU seconds once it has gone quiet: no more than one clock tick of CPU in
    SETTLE_WINDOW_S (/proc counts in ticks, 10 ms), or SETTLE_MAX_S passed. Read at the edges
    of each timed part, so work a part's messages set off after their answers (a bot that
    stores, marks done or summarises after it sent) is counted in that part, and nothing
    left over from before it is counted in it."""
    tick = 1 / os.sysconf("SC_CLK_TCK")
    deadline = time.perf_counter() + SETTLE_MAX_S
    last = cpu_s(pid)
    while True:
        await asyncio.sleep(SETTLE_WINDOW_S)
        now = cpu_s(pid)
        if now - last <= tick + 1e-9 or time.perf_counter() > deadline:
            return now
        last = now


def answers(tg: PollClock) -> int:
    return sum(m.method == "sendMessage" for m in tg.messages)


async def burst(tg: PollClock, chats: int, messages: int, base: int, word: str) -> float:
    """`chats` x `messages` messages pushed at once (chat by chat, round-robin); the seconds
    until the last one is answered."""
    before = answers(tg)
    t0 = time.perf_counter()
    for n in range(messages):
        for c in range(chats):
            await tg.push(message_update(USER + 1 + c, f"{word} {n}", message_id=base + n))
    await tg.wait_for(lambda: answers(tg) >= before + chats * messages, timeout=1800)
    return time.perf_counter() - t0


async def one_run(name: str, home: Path, base: int, load: Load | None) -> dict[str, float] | None:
    """One start, the one-chat latency run, the burst, then the instant burst (none of it
    without `load`: a start that only makes the database). Message ids count from `base`,
    so runs on the same database never repeat one."""
    tg = PollClock()
    # Update ids as Telegram's: never repeated on one database (the bot skips an id it
    # has stored as one sent again).
    tg._next_update = itertools.count(base + 1)
    tg = await tg.start()
    chats = load.chats if load else 1
    shape = {"instant": load is None}

    def respond(body: dict) -> Text:  # type: ignore[type-arg]
        if (written := summary(body)) is not None:
            return written
        if shape["instant"] or load is None:
            text = answer()
            return Text(text, chunk=len(text))  # one delta, at once
        return streamed(load)

    llm = await FakeOpenAI(responder=respond).start()
    try:
        bot = await start(name, home, tg, llm, chats)
        try:
            if load is None:
                return None
            pid = bot.proc.pid
            latencies = []
            cpu0, spy = 0.0, None
            for i in range(WARM_UP + load.latency):
                if i == WARM_UP:
                    cpu0 = await settle(pid)  # the warm-ups' and start-up's work done
                    drafts0 = len(tg.drafts)
                    spy = await profile_start(f"{name}-streamed", pid, base)
                before = answers(tg)
                t1 = time.perf_counter()
                await tg.push(message_update(USER, f"hi {i}", message_id=base + i))
                await tg.wait_for(lambda n=before: answers(tg) > n, timeout=120)
                if i >= WARM_UP:
                    latencies.append(time.perf_counter() - t1)
            rate = (
                load.chats
                * load.messages
                / await burst(tg, load.chats, load.messages, base + 1000, "burst")
            )
            handled = load.latency + load.chats * load.messages
            cpu1 = await settle(pid)
            cpu = (cpu1 - cpu0) / handled
            rss = rss_mb(pid)
            drafts = (len(tg.drafts) - drafts0) / handled
            await profile_stop(spy)
            shape["instant"] = True
            spy = await profile_start(f"{name}-instant", pid, base)
            per_chat = -(-load.instant // load.chats)
            calls0 = len(llm.requests)
            instant_s = await burst(tg, load.chats, per_chat, base + 50_000, "quick")
            cpu_instant = (await settle(pid) - cpu1) / (per_chat * load.chats)
            calls_instant = (len(llm.requests) - calls0) / (per_chat * load.chats)
            await profile_stop(spy)
        finally:
            await stop(name, bot)
    finally:
        await tg.stop()
        await llm.stop()
    kept, rejected = summaries(home)
    return {
        "start": bot.start,
        "p50": statistics.median(latencies),
        "rate": rate,
        "cpu": cpu,
        "rss": rss,
        "drafts": drafts,
        "cpu_instant": cpu_instant,
        "rate_instant": per_chat * load.chats / instant_s,
        "calls_instant": calls_instant,
        "kept": kept,
        "rejected": rejected,
    }


async def run(rounds: int, load: Load) -> None:
    got: dict[str, list[dict[str, float]]] = {name: [] for name in BOTS}
    with tempfile.TemporaryDirectory() as d:
        homes = {name: Path(d) / name for name in BOTS}
        written = {name: (0.0, 0.0) for name in BOTS}  # summaries kept, rejected so far
        for name, home in homes.items():
            home.mkdir()
            await one_run(name, home, 0, None)  # makes the database
        for r in range(rounds):
            for name in list(BOTS) if r % 2 == 0 else list(reversed(BOTS)):
                fig = await one_run(name, homes[name], (r + 1) * 100_000, load)
                assert fig is not None
                got[name].append(fig)
                kept, rejected = fig["kept"], fig["rejected"]
                fig["kept"], fig["rejected"] = kept - written[name][0], rejected - written[name][1]
                written[name] = (kept, rejected)
                said = (
                    f"; summaries {fig['kept']:.0f} kept, {fig['rejected']:.0f} rejected"
                    if name == "sidekick"
                    else ""
                )
                print(
                    f"round {r + 1} {name:<8} start {fig['start']:5.2f} s  "
                    f"p50 {fig['p50'] * 1000:6.0f} ms  {fig['rate']:5.2f} msg/s  "
                    f"CPU {fig['cpu'] * 1000:5.1f} ms/msg (instant "
                    f"{fig['cpu_instant'] * 1000:4.1f}, {fig['calls_instant']:.2f} model "
                    f"calls/msg{said})  RSS {fig['rss']:5.0f} MB  "
                    f"drafts {fig['drafts']:.2f}/msg  load {os.getloadavg()[0]:.1f}",
                    flush=True,
                )
    report(got, rounds, load)


def report(got: dict[str, list[dict[str, float]]], rounds: int, load: Load) -> None:
    def med(name: str, key: str) -> float:
        return statistics.median(f[key] for f in got[name])

    print(
        f"\nmedian of {rounds} alternated rounds: answers streamed in {load.chunks} deltas "
        f"{load.gap * 1000:.0f} ms apart, drafts on; burst {load.chats} chats x "
        f"{load.messages} messages at once; one-chat latency over {load.latency} messages; "
        f"instant: {load.instant} messages at once over {load.chats} chats, each answer in "
        f"one delta; load {os.getloadavg()[0]:.1f}"
    )
    rows = [
        ("latency p50 (ms)", "p50", 1000, ".0f", "lower is better"),
        ("start -> polling (s)", "start", 1, ".2f", "lower is better"),
        ("RSS after run (MB)", "rss", 1, ".0f", "lower is better"),
        ("messages/s (burst)", "rate", 1, ".2f", "higher is better"),
        ("CPU per message (ms)", "cpu", 1000, ".1f", "streamed answers; lower is better"),
        ("  instant answers (ms)", "cpu_instant", 1000, ".1f", "per-message cost alone"),
        ("  instant messages/s", "rate_instant", 1, ".1f", "higher is better"),
        ("  instant model calls", "calls_instant", 1, ".2f", "per message (summaries)"),
        ("drafts per message", "drafts", 1, ".2f", "both bots show drafts"),
    ]
    print(f"  {'':<22}{'sidekick':>10}{'plain':>10}{'ratio':>8}")
    for label, key, scale, fmt, note in rows:
        sk, pl = med("sidekick", key), med("plain", key)
        ratio = f"{sk / pl:.2f}x" if pl else "-"
        print(f"  {label:<22}{sk * scale:>10{fmt}}{pl * scale:>10{fmt}}{ratio:>8}  {note}")
    kept, rejected = (sum(f[key] for f in got["sidekick"]) for key in ("kept", "rejected"))
    print(f"  Sidekick's summaries of long sessions: {kept:.0f} kept, {rejected:.0f} rejected")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--quick", action="store_true", help="2 rounds, 10 burst and 5 timed messages")
    p.add_argument("--chats", type=int, default=4)
    p.add_argument("--messages", type=int, default=50, help="per chat in the burst")
    p.add_argument("--latency", type=int, default=10, help="one-chat messages timed")
    p.add_argument("--chunks", type=int, default=40, help="deltas per streamed answer")
    p.add_argument("--gap", type=float, default=0.025, help="seconds between deltas")
    p.add_argument(
        "--instant", type=int, default=200, help="messages of the instant burst (all chats)"
    )
    p.add_argument(
        "--profile", type=Path, metavar="DIR",
        help="py-spy each bot over its timed part into DIR (pip install py-spy; the CPU "
        "figures then include the sampling's cost)",
    )  # fmt: skip
    if "--quick" in sys.argv:  # new defaults; options given beside it still win
        p.set_defaults(rounds=2, messages=10, latency=5, instant=100)
    args = p.parse_args()
    global PROFILE
    if args.profile:
        args.profile.mkdir(parents=True, exist_ok=True)
        PROFILE = args.profile.resolve()
    load = Load(args.chats, args.messages, args.latency, args.chunks, args.gap, args.instant)
    asyncio.run(run(args.rounds, load))


if __name__ == "__main__":
    main()
