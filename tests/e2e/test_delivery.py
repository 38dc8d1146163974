"""How answers reach Telegram: splitting, 429 and 400 handling, drafts, many chats at once."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from bot.agent.prompt import without_context
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import MAX_TEXT, Sent, utf16_len


def long_markdown() -> str:
    """About 9,000 characters: prose with <, & and links, code blocks, emoji (UTF-16 pairs)."""
    parts = ["# Report 📊\n"]
    for i in range(1, 13):
        parts.append(
            f"## Section {i}\n"
            f"Values where a < b && c > d hold; see [the docs {i}](https://example.com/d?x={i}&y=<>).\n"
            f"Some **bold {i}** and _italic_ text with `inline <code>` and emoji 🎉🙂.\n\n"
            "```python\n"
            + "".join(f"if x{j} < 10 and y & 1:\n    print('<tag> & {j}')\n" for j in range(12))
            + "```\n\n"
        )
    text = "".join(parts)
    assert 8500 < len(text) < 9500, len(text)
    return text


def check_chunk(m: Sent) -> None:
    size = utf16_len(m.text)
    assert 0 < size <= MAX_TEXT
    for e in m.entities:
        assert e["offset"] >= 0 and e["length"] > 0 and e["offset"] + e["length"] <= size


async def test_long_markdown_answer_is_split_without_loss(tg: TG) -> None:
    markdown = long_markdown()
    tg.llm.add(Text(markdown, chunk=200))
    await tg.send(OWNER, "write the report")
    await tg.idle()
    sent = tg.server.sent_to(OWNER)
    assert len(sent) >= 2  # ~7,000 characters once the Markdown syntax is gone
    for m in sent:
        check_chunk(m)
    assert not [c for c in tg.server.calls if c.status != 200]
    whole = "".join(m.text for m in sent)
    # Every section, code line and special character arrives once, in order.
    for i in range(1, 13):
        assert whole.count(f"Section {i}\n") == 1
        assert whole.count(f"the docs {i}.") == 1
    assert whole.count("print('<tag> & 3')") == 12
    assert whole.count("a < b && c > d") == 12
    assert whole.index("Section 2\n") < whole.index("Section 11\n")
    pre = [e for m in sent for e in m.entities if e["type"] == "pre"]
    assert len(pre) >= 12 and all(e.get("language") == "python" for e in pre)
    links = [e for m in sent for e in m.entities if e["type"] == "text_link"]
    assert len(links) == 12 and links[0]["url"].startswith("https://example.com/d?x=1&y=")


async def test_telegram_429_on_send_waits_and_delivers(tg: TG) -> None:
    tg.server.fail_next("sendMessage", 429, retry_after=1)
    await tg.send(OWNER, "hello")
    reply = await tg.reply(OWNER)
    assert reply.text == "echo: hello"
    statuses = [c.status for c in tg.server.calls if c.method == "sendMessage"]
    assert statuses == [429, 200]
    assert len(tg.server.sent_to(OWNER)) == 1


async def test_rejected_formatting_is_resent_as_plain_text(tg: TG) -> None:
    tg.llm.add(Text("Click [here](javascript:alert(1)) **now**"))
    await tg.send(OWNER, "give me a link")
    reply = await tg.reply(OWNER)
    assert reply.text == "Click here now"
    assert reply.entities == []
    statuses = [c.status for c in tg.server.calls if c.method == "sendMessage"]
    assert statuses == [400, 200]


async def test_private_chat_streams_drafts_then_sends_once(tg: TG) -> None:
    answer = "Streaming answer, word by word, " * 8
    tg.llm.add(Text(answer, chunk=8, delay=0.01))
    await tg.send(OWNER, "stream please")
    await tg.idle()
    sent = tg.server.sent_to(OWNER)
    assert [m.text for m in sent] == [answer.strip()]
    drafts = tg.server.drafts
    assert drafts, "no draft was streamed"
    assert all(int(d.params["chat_id"]) == OWNER for d in drafts)
    assert len({d.params["draft_id"] for d in drafts}) == 1
    texts = [d.params["text"] for d in drafts]
    assert all(answer.startswith(t) for t in texts)
    assert texts == sorted(texts, key=len) and len(set(texts)) == len(texts)
    last_draft = max(d.at for d in drafts)
    assert last_draft <= sent[0].at


async def test_group_chat_gets_no_drafts(tg: TG) -> None:
    tg.llm.add(Text("group answer " * 10, chunk=5, delay=0.01))
    await tg.send(OWNER, "@sidekick_test_bot hello group", chat_id=-100500)
    reply = await tg.reply(-100500)
    assert reply.text.startswith("group answer")
    assert tg.server.drafts == []
    assert not [c for c in tg.server.calls if c.status != 200]


@pytest.mark.timeout(600)  # a hundred turns: minutes on a loaded machine; order is the point
async def test_fifty_chats_at_once_keep_their_order(tg: TG) -> None:
    users = list(range(2000, 2050))

    def slow_echo(body: dict[str, Any]) -> Text:
        last = without_context([m for m in body["messages"] if m["role"] == "user"][-1]["content"])
        return Text(f"re: {last}", chunk=3)  # several deltas: chats interleave

    tg.llm.responder = slow_echo
    for n in range(2):
        for user in users:
            await tg.send(user, f"{user} message {n}")
    got = await asyncio.gather(*(tg.replies(user, 2, timeout=540) for user in users))
    for user, replies in zip(users, got, strict=True):
        assert [r.text for r in replies] == [f"re: {user} message {n}" for n in range(2)]
    # Each chat's history holds its own messages, in order: no cross-talk between chats.
    last = {}
    for body in tg.llm.requests:
        users_msgs = [
            without_context(m["content"]) for m in body["messages"] if m["role"] == "user"
        ]
        last[users_msgs[-1].split()[0]] = users_msgs
    assert last["2007"] == ["2007 message 0", "2007 message 1"]
