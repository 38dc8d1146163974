"""`sidekick doctor` in the owner-code mode `sidekick setup` recommends (ALLOWED_USER_IDS
empty: the first to send the owner code privately becomes the owner) passes, and says how
the owner comes to be; it said "nobody will be served" and failed."""

from __future__ import annotations

import asyncio
import os
import sys
from pathlib import Path

import pytest

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.db
async def test_doctor_passes_in_owner_code_mode(
    tmp_path: Path, fake_llm: FakeOpenAI, telegram_server: FakeTelegram
) -> None:
    env = tmp_path / ".env"
    env.write_text(
        f"TELEGRAM_BOT_TOKEN={telegram_server.token}\nTELEGRAM_API_URL={telegram_server.base_url}\n"
        f"LLM_BASE_URL={fake_llm.base_url}\nLLM_MODEL=fake-model\nALLOWED_USER_IDS=\n"
    )
    env.chmod(0o600)
    environ = {k: v for k, v in os.environ.items() if k != "DATABASE_URL"}
    # Not blocking: the fakes answer the doctor's checks from this event loop.
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "bot", "doctor", cwd=tmp_path,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
        env={**environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    out, err = (s.decode() for s in await asyncio.wait_for(proc.communicate(), 600))
    (line,) = [line for line in out.splitlines() if "ALLOWED_USER_IDS" in line]
    assert line.startswith("ok") and "owner code" in line, out
    assert "FAIL" not in out, out
    assert proc.returncode == 0, (out, err)
