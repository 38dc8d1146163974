"""/tools and /context through the real Dispatcher, with the 60-tool MCP server plugged in."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from pathlib import Path

from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text
from tests.tools_helpers import write_mcp_config


async def test_tools_lists_groups_with_costs(
    make_tg: Callable[..., Awaitable[TG]], tmp_path: Path
) -> None:
    tg = await make_tg(mcp_config=write_mcp_config(tmp_path), approvals="off")
    await tg.send(OWNER, "/tools")
    text = (await tg.reply(OWNER)).text
    assert "budget 3800 tokens" in text and "o200k_base" in text
    core = re.search(r"Core, always shown — \d+ tools, (\d+) tokens: (.*)", text)
    assert core and {"memory", "code", "schedule"} <= set(core.group(2).split(", "))
    assert "search: set SEARXNG_URL or BRAVE_API_KEY" in text  # no backend: not offered
    assert "Direct — 0 tools" in text
    disc = re.search(r"Discoverable through tool_search — (\d+) tools, (\d+) tokens", text)
    assert disc and int(disc.group(1)) == 62  # 60 MCP tools + web_fetch + new_session
    assert int(disc.group(2)) > 3800
    assert "fake: up, 60 tools" in text
    # After using a tool, it is loaded directly for this user.
    name = "fake__bank_balance"
    tg.llm.add(Calls([("tool_explain", {"name": name})]), Calls([(name, {})]), Text("42 €"))
    await tg.send(OWNER, "how much money do I have")
    assert (await tg.reply(OWNER)).text == "42 €"
    await tg.send(OWNER, "/tools")
    text = (await tg.reply(OWNER)).text
    assert re.search(r"Direct — 1 tool, \d+ tokens: fake__bank_balance", text)
    await tg.send(2001, "/tools")  # another user has not used it
    assert "Direct — 0 tools" in (await tg.reply(2001)).text


async def test_context_shows_the_split_of_the_last_request(tg: TG) -> None:
    await tg.send(OWNER, "/context")
    assert "No request of yours" in (await tg.reply(OWNER)).text
    tg.llm.add(Text("first answer"))
    await tg.send(OWNER, "hello there, remember that I like tea")
    assert (await tg.reply(OWNER)).text == "first answer"
    await tg.send(OWNER, "/context")
    text = (await tg.reply(OWNER)).text
    total = int(re.search(r"(\d+) tokens in all", text).group(1))  # type: ignore[union-attr]
    parts = {
        m.group(1): int(m.group(2))
        for m in re.finditer(
            r"^(System prompt|Recalled memory|History|Tools)\b.*?(\d+) tokens", text, re.M
        )
    }
    assert set(parts) == {"System prompt", "Recalled memory", "History", "Tools"}
    assert sum(parts.values()) == total
    assert parts["System prompt"] > 0 and parts["History"] > 0 and parts["Tools"] > 500
    await tg.send(2001, "/context")  # per user
    assert "No request of yours" in (await tg.reply(2001)).text
