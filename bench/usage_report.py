"""/usage's text at many usage rows: its time and its length (in Telegram messages).

N model calls this month by one user, each with its own model name (the worst case: the
names a misconfigured fallback or a proxy's per-request aliases leave behind), in a fresh
SQLite database at head. Measured: building /usage's text (the queries and the lines) and
the chart's rows, and how long the text is.

Usage: python bench/usage_report.py [--rows 100000]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from zoneinfo import ZoneInfo

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from sqlalchemy import insert

from bench.cli import options
from bot.usage import repo
from bot.usage.meter import Meter
from bot.usage.models import ModelUsage
from bot.usage.report import usage_text
from bot.usage.settings import UsageSettings
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.models.core import User


async def main(rows: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        engine = create_engine(f"sqlite+aiosqlite:///{Path(tmp) / 'b.db'}")
        await upgrade(engine)
        sf = session_factory(engine)
        now = datetime.now(UTC)
        async with sf() as s, s.begin():
            s.add(User(id=1, telegram_id=1, name="a"))
        async with engine.begin() as conn:
            batch = [
                {
                    "at": now - timedelta(seconds=i % 3600),
                    "user_id": 1,
                    "purpose": ("chat", "archive", "code", "scheduled")[i % 4],
                    "model": f"vendor/model-{i}",
                    "prompt_tokens": 100,
                    "completion_tokens": 10,
                    "cached_tokens": 0,
                    "reasoning_tokens": 0,
                    "estimated": False,
                    "cost_usd": 0.0001 * (i % 7),
                }
                for i in range(rows)
            ]
            await conn.execute(insert(ModelUsage), batch)
        meter = Meter(UsageSettings(), sf, lambda: now, ZoneInfo("UTC"))
        t0 = time.perf_counter()
        text = await usage_text(meter, 1)
        t1 = time.perf_counter()
        async with sf() as s:
            chart_rows = await repo.usage_rows(s, 1, now - timedelta(days=14))
        t2 = time.perf_counter()
        print(
            f"{rows:,} rows: /usage text {t1 - t0:.2f} s, {len(text):,} characters "
            f"({-(-len(text) // 4096)} Telegram message(s)), {text.count(chr(10)) + 1} lines; "
            f"chart rows {t2 - t1:.2f} s ({len(chart_rows):,} rows read)"
        )
        await engine.dispose()


if __name__ == "__main__":
    asyncio.run(main(options(__doc__, rows=100_000).rows))
