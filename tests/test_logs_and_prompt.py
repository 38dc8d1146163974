"""Secret scrubbing in logs, and history trimming."""

from __future__ import annotations

import logging

import pytest

from bot.agent.prompt import trim_history
from bot.logs import Scrubber


def test_scrubber_removes_secrets_from_message_and_traceback(
    caplog: pytest.LogCaptureFixture,
) -> None:
    log = logging.getLogger("scrub-test")
    scrub = Scrubber(["sk-abcdef123"])
    caplog.handler.addFilter(scrub)
    try:
        try:
            raise RuntimeError("failed calling https://api/bot123456789:AAH" + "x" * 33 + "/getMe")
        except RuntimeError:
            log.exception("key %s rejected", "sk-abcdef123")
    finally:
        caplog.handler.removeFilter(scrub)
    text = caplog.text
    assert "sk-abcdef123" not in text and "AAHxxx" not in text
    assert "[secret]" in text and "RuntimeError" in text


def test_trim_keeps_newest_and_starts_at_user() -> None:
    msgs = [
        {"role": "user", "content": "a" * 400},
        {"role": "assistant", "content": None, "tool_calls": [{"id": "1"}]},
        {"role": "tool", "tool_call_id": "1", "content": "r" * 400},
        {"role": "assistant", "content": "done"},
        {"role": "user", "content": "latest"},
    ]
    assert trim_history(msgs, 10_000) == msgs
    kept = trim_history(msgs, 150)
    assert kept[0]["role"] == "user" and kept[-1]["content"] == "latest"
    assert all(m["role"] != "tool" for m in kept)  # no orphan tool result at the start
    assert trim_history(msgs, 1) == [msgs[-1]]
