"""The bot's own overhead per message, against local fake Telegram and model servers.

Runs the real App + aiogram Dispatcher (long polling, SQLite on a temp DATA_DIR, the openai
SDK) against tests/fakes servers on 127.0.0.1 with an instant model, in two phases:

1. latency: messages one at a time; per message, the handler's wall time minus the time the
   fake servers spent answering its requests = the bot's own overhead (p50, p95). The fake
   servers' HTTP parsing is still counted as overhead, so the figure is conservative.
2. throughput: N chats x M messages pushed at once; messages per second until the last reply,
   and CPU time per message (process CPU minus the fake servers' handler time).

Usage recording (bot/usage: the budget check before each model call, the usage row written
with the answer) is measured by alternating it on and off message by message in phase 1,
so both figures see the same conditions; budgets and prices are set so every part runs.

Usage: python bench/overhead.py [--chats 50] [--messages 20] [--sequential 300]
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import resource
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import TimedLLM, Timing, polling

from bot.app import build_app
from bot.config import load_settings
from bot.telegram.dispatcher import build_runtime
from bot.usage.meter import UsageTurns
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import FakeTelegram, message_update


def _last_user(body: dict[str, Any]) -> str:
    return [m["content"] for m in body["messages"] if m["role"] == "user"][-1]


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def server_time(
    tg: FakeTelegram | None, llm: TimedLLM | None, since_calls: int, since_llm: int
) -> float:
    """Seconds the fake servers spent in handlers (getUpdates long polls excluded)."""
    t = 0.0
    if tg is not None:
        t += sum(c.duration for c in tg.calls[since_calls:] if c.method != "getUpdates")
    if llm is not None:
        t += sum(end - start for start, end in llm.spans[since_llm:])
    return t


async def run(chats: int, messages: int, sequential: int) -> None:
    tg = await FakeTelegram().start()
    llm = await TimedLLM(lambda body: Text("ok: " + _last_user(body), chunk=10_000)).start()
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            data_dir=Path(tmp),
            telegram_bot_token=tg.token,
            telegram_api_url=tg.base_url,
            allowed_user_ids=",".join(str(1000 + i) for i in range(chats)),
            llm_base_url=llm.base_url,
            llm_api_key="sk-bench",
            llm_model="fake-model",
            prices="fake-model=0.15/0.6",
            budget_usd="1000/day, 10000/month",
            user_token_cap="1000000000/day",
        )
        app = await build_app(settings)
        rt = build_runtime(app)
        timing = Timing()
        rt.dp.update.outer_middleware.register(timing)
        agent_spans: list[tuple[float, float]] = []
        real_handle = app.agent.handle

        async def timed_handle(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return await real_handle(*args, **kwargs)
            finally:
                agent_spans.append((start, time.perf_counter()))

        app.agent.handle = timed_handle  # type: ignore[method-assign]
        metering_ms = time_metering(app)
        async with polling(rt, tg, poll_s=10):
            # Phase 1: one message at a time, usage recording on for odd messages.
            in_metering: list[float] = []
            overheads: list[float] = []
            adapter: list[float] = []
            agent: list[float] = []
            by_usage: dict[bool, list[float]] = {True: [], False: []}
            # Usage recording off: the agent's request hooks without the usage feature's.
            metered_hooks = app.agent.requests
            unmetered = [r for r in metered_hooks if not isinstance(r, UsageTurns)]
            for i in range(sequential + 20):
                user = 1000 + i % chats
                metered = i % 2 == 1
                app.agent.requests = metered_hooks if metered else unmetered
                metering_ms.clear()
                calls_before, llm_before = len(tg.calls), len(llm.spans)
                sent_before = len(tg.messages)
                await tg.push(message_update(user, f"hello {i}", message_id=i + 1))
                await tg.wait_for(lambda n=sent_before: len(tg.messages) > n)
                await rt.inflight.wait_idle()
                start, end = timing.spans.pop()
                a_start, a_end = agent_spans.pop()
                tg_wait = server_time(tg, None, calls_before, 0)
                llm_wait = server_time(None, llm, 0, llm_before)
                if i >= 20:  # the first messages warm up caches and connection pools
                    overheads.append((end - start - tg_wait - llm_wait) * 1000)
                    by_usage[metered].append(overheads[-1])
                    if metered:
                        in_metering.append(sum(metering_ms))
                    agent.append((a_end - a_start - llm_wait) * 1000)
                    adapter.append((end - start - (a_end - a_start) - tg_wait) * 1000)
                timing.spans.clear()

            # Phase 2: every chat at once; usage recording off, then on, half the rounds each
            # (CPU time per message is the steadier A/B figure on a busy machine).
            rounds = max(1, messages // 2)
            total = chats * rounds
            bursts: dict[bool, tuple[float, float]] = {}
            for metered in (False, True):
                app.agent.requests = metered_hooks if metered else unmetered
                sent_before, calls_before, llm_before = (
                    len(tg.messages),
                    len(tg.calls),
                    len(llm.spans),
                )
                cpu0 = _cpu()
                t0 = time.perf_counter()
                for n in range(rounds):
                    for c in range(chats):
                        mid = 10_000 + n + (rounds if metered else 0)
                        await tg.push(message_update(1000 + c, f"burst {n}", message_id=mid))
                await tg.wait_for(lambda n=sent_before: len(tg.messages) >= n + total, timeout=600)
                wall = time.perf_counter() - t0
                cpu = _cpu() - cpu0 - server_time(tg, llm, calls_before, llm_before)
                bursts[metered] = (wall, cpu)
            app.agent.requests = metered_hooks
    await tg.stop()
    await llm.stop()

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    def line(name: str, values: list[float]) -> str:
        return f"  {name:<34} p50 {statistics.median(values):7.2f}  p95 {pct(values, 0.95):7.2f}"

    print(f"sequential: {len(overheads)} messages, own time per message in ms")
    print(line("bot overhead (all but fake I/O)", overheads) + "  (target: p50 <= 3, p95 <= 10)")
    print(line("  of which agent (bot/agent, tools)", agent))
    print(line("  of which Telegram adapter", adapter))
    off, on = by_usage[False], by_usage[True]
    print(line("usage recording off", off))
    print(line("usage recording on", on))
    delta = statistics.median(on) - statistics.median(off)
    print(f"  on - off: {delta:+.2f} ms p50 (target: within +0.5 ms; noisy on a busy machine)")
    print(line("time inside usage recording", in_metering))
    for metered, (wall, cpu) in bursts.items():
        state = "on" if metered else "off"
        print(
            f"concurrent, usage recording {state}: {chats} chats x {rounds} messages = "
            f"{total} in {wall:.2f} s"
        )
        print(
            f"  {total / wall:.0f} messages/s (target: >= 250); "
            f"bot CPU per message {cpu / total * 1000:.2f} ms"
        )
    print(f"peak RSS: {rss_mb:.0f} MB (bench process, fake servers included)")


def time_metering(app: Any) -> list[float]:
    """Wall time (ms) spent in bot/usage per message: the budget check before each model
    call, the usage row with each answer, the request set-up and the reply's notes."""
    from bot.usage import meter as metering

    spent: list[float] = []

    def timed(fn: Any) -> Any:
        if asyncio.iscoroutinefunction(fn):

            async def run_async(*args: Any, **kwargs: Any) -> Any:
                start = time.perf_counter()
                try:
                    return await fn(*args, **kwargs)
                finally:
                    spent.append((time.perf_counter() - start) * 1000)

            return run_async

        def run(*args: Any, **kwargs: Any) -> Any:
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.append((time.perf_counter() - start) * 1000)

        return run

    metering.after_call = timed(metering.after_call)
    metering.Metering.notes = timed(metering.Metering.notes)  # type: ignore[method-assign]
    metering.UsageTurns.begin = timed(metering.UsageTurns.begin)  # type: ignore[method-assign]
    hook = metering.Budgeted.on_model_request  # the budgets are set: Budgeted meters
    metering.Budgeted.on_model_request = timed(hook)  # type: ignore[method-assign]
    return spent


def _cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--chats", type=int, default=50)
    p.add_argument("--messages", type=int, default=20)
    p.add_argument("--sequential", type=int, default=300)
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args.chats, args.messages, args.sequential))


if __name__ == "__main__":
    main()
