"""Start-up time and resident memory of a real `python -m bot` process, seen from outside.

The bot runs as its own process (long polling, SQLite in a temp DATA_DIR, memory with
WordLlama, search via SEARXNG_URL, code, tool discovery) against tests/fakes servers on
127.0.0.1 in this process. Figures, each with its target:

- start-up: process start -> first getUpdates (the bot is polling);
- first message latency (the one that loads what start-up left for later) and a warm one;
- RSS idle after start, and after N messages (50 chats, in turns);
- `sidekick chat` (python -m bot.cli chat): process start -> its first `you>` prompt;
- what each heavy import costs on its own (wall ms, RSS MB) in a fresh interpreter.

Usage: python bench/startup.py [--messages 1000] [--mcp] [--skip-imports]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.fakes.openai_server import FakeOpenAI, Text  # noqa: E402
from tests.fakes.telegram_server import FakeTelegram, message_update  # noqa: E402

CHATS = 50
HEAVY = [
    "aiogram",
    "aiogram.types",
    "bot.telegram",  # aiogram as the bot imports it: types built on first use (lazy_types)
    "httpx",
    "bot.llm.client",  # the model client over httpx (the openai SDK is no longer used)
    "sqlalchemy.ext.asyncio",
    "alembic.command",
    "apscheduler.schedulers.asyncio",
    "numpy",
    "wordllama",
    "bpe_openai",
    "trafilatura",
    "mcp",
    "telegramify_markdown",
    "bot.app",
    "bot.telegram.main",
    "bot.terminal.chat",
]


class PollClock(FakeTelegram):
    """The fake Bot API, noting when each getUpdates arrives (calls are recorded when
    answered, and a long poll is answered up to 30 s later)."""

    def __init__(self) -> None:
        super().__init__()
        self.poll_starts: list[float] = []

    async def _m_getUpdates(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        self.poll_starts.append(time.time())
        return await super()._m_getUpdates(params, files)


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far: unlike wall time, not inflated when
    other work shares the machine."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return float("nan")


def rss_split(pid: int) -> str:
    """Private memory vs pages of files (shared libraries, the mapped embedding table)."""
    return f"anon {rss_mb(pid, 'RssAnon'):.0f} MB, file {rss_mb(pid, 'RssFile'):.0f} MB"


def bot_env(tmp: Path, tg: FakeTelegram, llm: FakeOpenAI, mcp: bool) -> dict[str, str]:
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp),
        "DATA_DIR": str(tmp / "data"),
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_URL": tg.base_url,
        "ALLOWED_USER_IDS": ",".join(str(1000 + i) for i in range(CHATS)),
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-bench",
        "LLM_MODEL": "fake-model",
        "SEARXNG_URL": "http://127.0.0.1:9/",  # search on; never called by this bench
        "LOG_LEVEL": "WARNING",
    }
    if mcp:
        server = ROOT / "tests" / "fakes" / "mcp_server.py"
        cfg = tmp / "mcp.json"
        cfg.write_text(json.dumps({"mcpServers": {"fake": {"command": sys.executable,
                                                           "args": [str(server)]}}}))  # fmt: skip
        env["MCP_CONFIG"] = str(cfg)
    return env


async def exchange(tg: FakeTelegram, user: int, text: str, message_id: int) -> float:
    """Seconds from pushing one message to the bot's reply."""
    before = len(tg.messages)
    t0 = time.perf_counter()
    await tg.push(message_update(user, text, message_id=message_id))
    await tg.wait_for(lambda: len(tg.messages) > before, timeout=120)
    return time.perf_counter() - t0


async def start_bot(
    tg: PollClock, env: dict[str, str]
) -> tuple[asyncio.subprocess.Process, float, float]:
    """Starts `python -m bot`; returns it, the seconds until its first getUpdates and the
    CPU seconds it used until then."""
    t0 = time.time()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", cwd=ROOT, env=env,
        stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.PIPE,
    )  # fmt: skip
    while not any(t > t0 for t in tg.poll_starts):
        await asyncio.sleep(0.01)
        if time.time() - t0 > 120:
            raise TimeoutError("the bot did not start polling within 120 s")
    return proc, min(t for t in tg.poll_starts if t > t0) - t0, cpu_s(proc.pid)


async def bot_figures(messages: int, mcp: bool) -> None:
    tg = await PollClock().start()
    llm = await FakeOpenAI(responder=lambda body: Text("ok", chunk=10_000)).start()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = bot_env(tmp, tg, llm, mcp)
        # First start: a new database (every migration runs); stop once it polls.
        proc, new_db, _ = await start_bot(tg, env)
        proc.terminate()
        await proc.communicate()
        # Restart on that database: the usual start, and the figure with the target.
        proc, startup, startup_cpu = await start_bot(tg, env)
        try:
            await asyncio.sleep(1.0)
            idle, idle_split = rss_mb(proc.pid), rss_split(proc.pid)
            first = await exchange(tg, 1000, "hello, remember I like tea", 1)
            warm = await exchange(tg, 1001, "hello again", 2)
            # N more messages, 50 chats in turns, a few in flight at once.
            sent = len(tg.messages)
            t1 = time.perf_counter()
            for i in range(messages):
                await tg.push(message_update(1000 + i % CHATS, f"message {i}", message_id=10 + i))
                if i % CHATS == CHATS - 1:
                    await tg.wait_for(lambda n=sent + i + 1: len(tg.messages) >= n, timeout=300)
            await tg.wait_for(lambda: len(tg.messages) >= sent + messages, timeout=300)
            rate = messages / (time.perf_counter() - t1)
            after, after_split = rss_mb(proc.pid), rss_split(proc.pid)
        finally:
            proc.terminate()
            _, err = await proc.communicate()
    await tg.stop()
    await llm.stop()
    if b"Traceback" in err:
        print(err.decode()[-2000:], file=sys.stderr)
    mode = " (+ MCP server)" if mcp else ""
    print(f"sidekick run{mode}: memory, search, code, discovery on; load {_load()}")
    print(f"  start -> first getUpdates     {startup:6.2f} s    target <= 2.0 s")
    print(f"  (CPU used until then          {startup_cpu:6.2f} s)")
    print(f"  (first start, new database    {new_db:6.2f} s)")
    print(f"  first message round trip      {first * 1000:6.0f} ms   (loads lazy parts)")
    print(f"  warm message round trip       {warm * 1000:6.0f} ms")
    print(f"  RSS idle after start          {idle:6.0f} MB   target <= 150 MB")
    print(f"    ({idle_split})")
    print(f"  RSS after {messages:>5} messages     {after:6.0f} MB   target <= 200 MB")
    print(f"    ({after_split})")
    print(f"  ({rate:.0f} messages/s from outside, 50 chats in turns)")


async def chat_figure() -> None:
    llm = await FakeOpenAI().start()
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "HOME": str(tmp),
            "DATA_DIR": str(tmp / "data"),
            "LLM_BASE_URL": llm.base_url,
            "LLM_API_KEY": "sk-bench",
            "LLM_MODEL": "fake-model",
            "LOG_LEVEL": "WARNING",
        }
        t0 = time.perf_counter()
        proc = await asyncio.create_subprocess_exec(
            sys.executable, "-m", "bot.cli", "chat", cwd=ROOT, env=env,
            stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        assert proc.stdout is not None and proc.stdin is not None
        out = b""
        while b"you> " not in out:
            chunk = await asyncio.wait_for(proc.stdout.read(256), 120)
            if not chunk:
                break
            out += chunk
        took = time.perf_counter() - t0
        cpu = cpu_s(proc.pid)
        proc.stdin.close()
        await proc.wait()
    await llm.stop()
    print(f"sidekick chat: start -> first prompt {took:6.2f} s    target <= 1.5 s")
    print(f"  (CPU used until then          {cpu:6.2f} s; load {_load()})")


def import_costs() -> None:
    """Each heavy import alone in a fresh interpreter: wall ms and RSS MB over bare Python."""
    code = (
        "import sys,time\n"
        "def rss():\n"
        " for l in open('/proc/self/status'):\n"
        "  if l.startswith('VmRSS:'): return int(l.split()[1])\n"
        "r0=rss()\n"
        "t=time.perf_counter()\n"
        "import importlib; importlib.import_module(sys.argv[1])\n"
        "dt=time.perf_counter()-t\n"
        "print(dt*1000,(rss()-r0)/1024)\n"
    )
    print("import costs (alone, fresh interpreter; shared dependencies count each time):")
    _print_costs(code, {name: name for name in HEAVY})


def _print_costs(code: str, items: dict[str, str]) -> None:
    """Runs `code` with each item's argument in a fresh interpreter: its ms and MB."""
    for name, arg in items.items():
        out = subprocess.run(
            [sys.executable, "-c", code, arg], cwd=ROOT, capture_output=True, text=True
        )
        if out.returncode:
            print(f"  {name:<34} failed: {out.stderr.strip().splitlines()[-1]}")
            continue
        ms, mb = (float(x) for x in out.stdout.split())
        print(f"  {name:<34} {ms:7.0f} ms  {mb:6.1f} MB")


TEXTS = "['hello, remember I like tea', 'message 12', 'a longer note about the garden'] * 30"
WARM = {  # each loads the piece, keeps it (as the bot does) and uses it once
    "embedder (WordLlama, mapped)": (
        f"from tools.memory.embeddings import WordLlamaEmbedder as E; E().embed_sync({TEXTS})"
    ),
    "token counter (o200k, tools.bpe)": (
        f"from tools.tokens import encoder; [encoder().encode(t) for t in {TEXTS}]"
    ),
    "(bpe-openai Rust tokenizer, unused)": (
        "import bpe_openai; e = bpe_openai.get_encoding('o200k_base');"
        f" [e.encode(t) for t in {TEXTS}]"
    ),
    "(WordLlama package, unused)": (
        "import wordllama; from pathlib import Path; m = wordllama.WordLlama.load(dim=256,"
        f" cache_dir=Path(wordllama.__file__).parent, disable_download=True); m.embed({TEXTS})"
    ),
}


def warm_costs() -> None:
    """What App.warm_up loads after polling starts, each over the bot's own imports."""
    code = (
        "import sys,time\n"
        "def rss():\n"
        " for l in open('/proc/self/status'):\n"
        "  if l.startswith('VmRSS:'): return int(l.split()[1])\n"
        "import bot.telegram.main\n"
        "r0=rss()\n"
        "t=time.perf_counter()\n"
        "exec(sys.argv[1])\n"
        "dt=time.perf_counter()-t\n"
        "print(dt*1000,(rss()-r0)/1024)\n"
    )
    print("warm-up pieces (fresh interpreter, over bot.telegram.main's imports):")
    _print_costs(code, WARM)


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--messages", type=int, default=1000)
    p.add_argument("--mcp", action="store_true", help="also start the fake MCP server")
    p.add_argument("--skip-imports", action="store_true")
    args = p.parse_args()
    asyncio.run(bot_figures(args.messages, args.mcp))
    asyncio.run(chat_figure())
    if not args.skip_imports:
        import_costs()
        warm_costs()


if __name__ == "__main__":
    main()
