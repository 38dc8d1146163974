"""Markdown → Telegram text + entities, and splitting at 4096 UTF-16 units."""

from __future__ import annotations

import re

import pytest
from telegramify_markdown import convert

from bot.access.pairing import refusal_text
from bot.config import load_settings
from bot.errors import ConfigError
from bot.telegram.main import listen_address, webhook_secret
from bot.telegram.render import MAX_UTF16, render, split_plain, tail, utf16_len
from bot.telegram.routers import bot_commands, build_routers


def check(chunks: list[tuple[str, list]]) -> None:
    for text, entities in chunks:
        size = utf16_len(text)
        assert 0 < size <= MAX_UTF16 and text.strip()
        for e in entities:
            assert e.offset >= 0 and e.length > 0 and e.offset + e.length <= size


def test_short_markdown_becomes_text_and_entities() -> None:
    [(text, entities)] = render("Use **bold**, `x < y && z` and [a link](https://example.com)")
    assert text == "Use bold, x < y && z and a link"
    kinds = {(e.type, text[e.offset : e.offset + e.length]) for e in entities}
    assert kinds == {("bold", "bold"), ("code", "x < y && z"), ("text_link", "a link")}


def test_entity_offsets_count_utf16_units() -> None:
    [(text, entities)] = render("🎉🎉 **after emoji**")
    bold = next(e for e in entities if e.type == "bold")
    assert bold.offset == 5  # two emoji are two UTF-16 units each, plus a space
    assert (
        text.encode("utf-16-le")[2 * bold.offset : 2 * (bold.offset + bold.length)].decode(
            "utf-16-le"
        )
        == "after emoji"
    )


def test_long_answer_splits_within_limit_and_reassembles() -> None:
    line = "Paragraph with emoji 🙂 and **bold** text and `code` & <tags>.\n"
    markdown = line * 300 + "```python\n" + "print('x')\n" * 600 + "```\n" + line * 50
    chunks = render(markdown)
    assert len(chunks) >= 5
    check(chunks)
    whole, _ = convert(markdown)
    assert "".join(t for t, _ in chunks) == whole
    pre = [e for _, ents in chunks for e in ents if e.type == "pre"]
    assert len(pre) >= 2 and all(e.language == "python" for e in pre)  # clipped, kept on both sides


def test_a_single_huge_line_is_hard_split_between_characters() -> None:
    text = "😀" * 5000  # 10,000 UTF-16 units, no newline anywhere
    pieces = split_plain(text)
    assert all(utf16_len(p) <= MAX_UTF16 for p in pieces)
    assert "".join(pieces) == text
    chunks = render(text)
    check(chunks)
    assert "".join(t for t, _ in chunks) == text


def test_empty_answer_still_sends_something() -> None:
    assert render("   \n ") == [("(empty answer)", [])]


def test_draft_tail_is_the_last_chunk_of_a_partial_answer() -> None:
    partial = "x" * 5000 + "\n```python\nprint(1)"  # unclosed fence while streaming
    text, entities = tail(partial)
    assert text.endswith("print(1)") and utf16_len(text) <= MAX_UTF16
    check([(text, entities)])


def test_refusal_names_the_id_and_the_env_line() -> None:
    text = refusal_text(987654)
    assert "987654" in text
    assert re.search(r"^ALLOWED_USER_IDS=987654$", text, re.M)


def test_the_menu_is_the_shared_command_table() -> None:
    names = [c.command for c in bot_commands()]
    assert {"start", "help", "newsession", "usage", "reminders"} <= set(names)
    assert "new" not in names  # an alias answers, but the menu shows the name once
    assert len(names) == len(set(names))
    # Every row has a handler that says it answers it (`flags={"command": name}`).
    declared = [
        h.flags["command"]
        for router in build_routers()
        for r in router.chain_tail
        for h in r.message.handlers
        if h.flags.get("command")
    ]
    assert sorted(declared) == sorted(names)


def test_webhook_secret_is_stable_and_telegram_safe() -> None:
    a = load_settings(telegram_bot_token="123:AAA")
    b = load_settings(telegram_bot_token="123:BBB")
    assert webhook_secret(a) == webhook_secret(a) != webhook_secret(b)
    assert re.fullmatch(r"[A-Za-z0-9_-]{1,256}", webhook_secret(a))
    assert "AAA" not in webhook_secret(a)


def test_listen_address() -> None:
    assert listen_address("0.0.0.0:8080") == ("0.0.0.0", 8080)
    assert listen_address(":9000") == ("127.0.0.1", 9000)  # no host named: loopback only
    with pytest.raises(ConfigError, match="WEBHOOK_LISTEN"):
        listen_address("localhost")
