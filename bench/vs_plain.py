"""Sidekick side by side with a plain aiogram + openai SDK + SQLite bot (bench/plain_bot.py,
the reference issue 25 names), both as real processes against the same local fakes
(tests/fakes: Bot API, instant model), in alternated rounds in one run, so both see the same
machine load. Per bot and round:

- start -> first getUpdates (process start until it polls), on the database an untimed first
  start made (the usual start: migrations and schema are already there);
- per-message latency: messages one at a time, push to reply, p50;
- throughput: C chats x M messages pushed at once, messages per second until the last reply;
- the bot process's CPU time per message over both (steadier than wall time under load).

Printed: the median over rounds of each, and Sidekick's ratio to the plain bot.

Usage: python bench/vs_plain.py [--rounds 5] [--sequential 60] [--chats 20] [--messages 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "bench"))

from startup import PollClock, cpu_s  # noqa: E402

from tests.fakes.openai_server import FakeOpenAI, Text  # noqa: E402
from tests.fakes.telegram_server import message_update  # noqa: E402

WARM_UP = 5


@dataclass
class Bot:
    proc: asyncio.subprocess.Process
    start: float  # seconds from process start to its first getUpdates


BOTS = {
    "sidekick": [sys.executable, "-m", "bot"],
    "plain": [sys.executable, str(ROOT / "bench" / "plain_bot.py")],
}


def env_for(tmp: Path, tg: PollClock, llm: FakeOpenAI, chats: int) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "DATA_DIR": str(tmp / "data"),
        "DB_PATH": str(tmp / "plain.db"),
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_URL": tg.base_url,
        "ALLOWED_USER_IDS": ",".join(str(1000 + i) for i in range(chats)),
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_MODEL": "fake-model",
        "LOG_LEVEL": "WARNING",
    }


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


async def one_run(
    name: str, home: Path, base: int, sequential: int, chats: int, messages: int
) -> dict[str, float] | None:
    """One start, `sequential` messages one at a time, then the burst (none of it when
    `sequential` is 0: a start that only makes the database). Message ids count from
    `base`, so runs on the same database never repeat one."""
    tg = await PollClock().start()
    llm = await FakeOpenAI(responder=lambda body: Text("ok", chunk=10_000)).start()
    try:
        bot = await start(name, home, tg, llm, chats)
        try:
            if not sequential:
                return None
            latencies = []
            cpu0 = 0.0
            for i in range(WARM_UP + sequential):
                if i == WARM_UP:
                    cpu0 = cpu_s(bot.proc.pid)
                before = len(tg.messages)
                t1 = time.perf_counter()
                await tg.push(message_update(1000 + i % chats, f"hi {i}", message_id=base + i))
                await tg.wait_for(lambda n=before: len(tg.messages) > n, timeout=120)
                if i >= WARM_UP:
                    latencies.append(time.perf_counter() - t1)
            before = len(tg.messages)
            t2 = time.perf_counter()
            for n in range(messages):
                for c in range(chats):
                    mid = base + 10_000 + n
                    await tg.push(message_update(1000 + c, f"burst {n}", message_id=mid))
            total = chats * messages
            await tg.wait_for(lambda: len(tg.messages) >= before + total, timeout=600)
            rate = total / (time.perf_counter() - t2)
            cpu = (cpu_s(bot.proc.pid) - cpu0) / (sequential + total)
        finally:
            await stop(name, bot)
    finally:
        await tg.stop()
        await llm.stop()
    return {"start": bot.start, "p50": statistics.median(latencies), "rate": rate, "cpu": cpu}


async def run(rounds: int, sequential: int, chats: int, messages: int) -> None:
    got: dict[str, list[dict[str, float]]] = {name: [] for name in BOTS}
    with tempfile.TemporaryDirectory() as d:
        homes = {name: Path(d) / name for name in BOTS}
        for name, home in homes.items():
            home.mkdir()
            await one_run(name, home, 0, 0, chats, messages)  # makes the database
        for r in range(rounds):
            for name in list(BOTS) if r % 2 == 0 else list(reversed(BOTS)):
                base = (r + 1) * 100_000
                fig = await one_run(name, homes[name], base, sequential, chats, messages)
                assert fig is not None
                got[name].append(fig)
                print(
                    f"round {r + 1} {name:<8} start {fig['start']:5.2f} s  "
                    f"p50 {fig['p50'] * 1000:6.1f} ms  {fig['rate']:6.0f} msg/s  "
                    f"CPU {fig['cpu'] * 1000:5.2f} ms/msg",
                    flush=True,
                )
    report(got, rounds, sequential, chats, messages)


def report(
    got: dict[str, list[dict[str, float]]], rounds: int, sequential: int, chats: int, messages: int
) -> None:
    def med(name: str, key: str) -> float:
        return statistics.median(f[key] for f in got[name])

    sk, pl = "sidekick", "plain"
    print(f"\nmedian of {rounds} alternated rounds ({chats} chats x {messages} burst, "
          f"{sequential} sequential); load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print(f"  messages/s        sidekick {med(sk, 'rate'):7.0f}   plain {med(pl, 'rate'):7.0f}"
          f"   ratio {med(sk, 'rate') / med(pl, 'rate'):.2f}x (goal >= 0.9x)")  # fmt: skip
    print(f"  latency p50 (ms)  sidekick {med(sk, 'p50') * 1000:7.1f}   plain "
          f"{med(pl, 'p50') * 1000:7.1f}   ratio {med(sk, 'p50') / med(pl, 'p50'):.2f}x "
          "(goal <= 1x)")  # fmt: skip
    print(f"  start -> polling  sidekick {med(sk, 'start'):7.2f}   plain {med(pl, 'start'):7.2f}"
          f"   ratio {med(sk, 'start') / med(pl, 'start'):.2f}x (goal <= 1x)")  # fmt: skip
    print(f"  CPU per message   sidekick {med(sk, 'cpu') * 1000:7.2f}   plain "
          f"{med(pl, 'cpu') * 1000:7.2f}   ratio {med(sk, 'cpu') / med(pl, 'cpu'):.2f}x "
          "(the steadier figure on a busy machine)")  # fmt: skip


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--sequential", type=int, default=60)
    p.add_argument("--chats", type=int, default=20)
    p.add_argument("--messages", type=int, default=5)
    args = p.parse_args()
    asyncio.run(run(args.rounds, args.sequential, args.chats, args.messages))


if __name__ == "__main__":
    main()
