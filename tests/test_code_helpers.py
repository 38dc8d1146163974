"""Shared pieces for the code tool tests: a migrated database, deps, a request context."""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from bot.config import Settings
from bot.llm.client import LLMClient
from db.engine import create_engine, session_factory
from db.migrate import upgrade
from db.repos import core
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.polling import polled
from tests.sessions_env import add_message
from tools.base import RequestContext, ToolCall, ToolDeps
from tools.code.modes import choose_mode, probe_kernel
from tools.code.runner import CodeRunner
from tools.code.tool import CodeService

SECRET_TOKEN = "123456:TEST-telegram-token-never-leaks"


def bwrap_reason() -> str | None:
    mode, why = choose_mode("on")
    return None if mode == "bwrap" else why


needs_bwrap = pytest.mark.skipif(
    bwrap_reason() is not None, reason=f"bubblewrap unusable here: {bwrap_reason()}"
)
needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="the throwaway-uid sweep needs root")
needs_landlock = pytest.mark.skipif(
    probe_kernel().landlock_abi < 1, reason="no Landlock in this kernel"
)
needs_namespaces = pytest.mark.skipif(
    not probe_kernel().namespaces, reason="the kernel refuses user/mount namespaces"
)

# Every mode this machine supports, built explicitly whatever choose_mode would pick:
# bubblewrap, Landlock with the namespaces it can get, Landlock alone (a kernel that
# refuses user namespaces, as Ubuntu's AppArmor does), the mount-namespace view.
STRONG_MODES = [
    pytest.param("bwrap", marks=needs_bwrap, id="bwrap"),
    pytest.param("landlock", marks=[needs_landlock, needs_namespaces], id="landlock"),
    pytest.param("landlock-only", marks=needs_landlock, id="landlock-only"),
    pytest.param("namespace", marks=needs_namespaces, id="namespace"),
]
MODES = [*STRONG_MODES, pytest.param("basic", marks=needs_root, id="basic")]


@dataclass
class Env:
    settings: Settings
    deps: ToolDeps
    ctx: RequestContext

    def call(self, call_id: str = "call_1", reasoning: str = "because") -> ToolCall:
        return ToolCall(ctx=self.ctx, call_id=call_id, reasoning=reasoning)

    def in_mode(self, mode: str, network: bool = True) -> CodeService:
        """A service whose runner uses `mode` (one of MODES)."""
        svc = self.service()
        assert svc.runner is not None
        base = "landlock" if mode == "landlock-only" else mode
        svc.mode = base  # type: ignore[assignment]
        svc.runner = CodeRunner(
            svc.runner.bun,
            base,  # type: ignore[arg-type]
            network=network,
            max_concurrent=2,
            namespaces=False if mode == "landlock-only" else None,
        )
        return svc

    def service(self, **overrides: Any) -> CodeService:
        deps = self.deps
        if overrides:
            s = self.settings.model_copy(update=overrides)
            deps = ToolDeps(s, deps.session_factory, deps.http, deps.llm, deps.clock, deps.closers)
        return CodeService(deps)


@pytest.fixture
async def env(tmp_path: Path, fake_llm: FakeOpenAI) -> AsyncIterator[Env]:
    import httpx

    settings = make_settings(tmp_path, fake_llm, telegram_bot_token=SECRET_TOKEN)
    settings.data_dir.mkdir(parents=True, exist_ok=True)
    engine = create_engine(settings.db_url)
    await upgrade(engine)
    sf = session_factory(engine)
    http = httpx.AsyncClient()
    llm = LLMClient(settings, retry_base_delay=0.01, retry_max_delay=0.05)
    deps = ToolDeps(settings=settings, session_factory=sf, http=http, llm=llm)
    ctx = await _context(sf)
    try:
        yield Env(settings, deps, ctx)
    finally:
        for closer in reversed(deps.closers):
            await closer()
        await llm.close()
        await http.aclose()
        await engine.dispose()


async def _context(sf: Any) -> RequestContext:
    from datetime import UTC, datetime

    now = datetime.now(UTC)
    async with sf.begin() as s:
        user = await core.get_or_create_user(s, 4242, "Ann", now)
        session = await core.create_session(s, user.id, None, now)
        message_id = await add_message(
            s,
            session_id=session.id,
            user_id=user.id,
            role="user",
            content="run something",
            request_id="req-1",
            now=now,
        )
        return RequestContext(
            request_id="req-1",
            user_id=user.id,
            session_id=session.id,
            trigger_message_id=message_id,
            telegram_user_id=4242,
        )


async def gone(marker: str, deadline_s: float = 15.0) -> list[str]:
    """`leftovers(marker)` once they are gone, or what is left at the deadline: processes
    killed by the run's sweep take a moment to exit under load (a survivor stays a failure)."""
    await polled(lambda: not leftovers(marker), deadline_s)
    return leftovers(marker)


def leftovers(marker: str) -> list[str]:
    """Command lines of live processes that mention `marker` (a unique sleep length)."""
    found = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/cmdline", "rb") as f:
                    cmd = f.read().replace(b"\0", b" ").decode(errors="replace")
            except OSError:
                continue
            if marker in cmd:
                found.append(cmd)
    return found
