"""tools.bpe counts o200k_base tokens in plain Python: the same token ids as the
bpe-openai Rust tokenizer on real text (this project's own files, code, JSON schemas,
non-Latin scripts, emoji, numbers, contractions, odd whitespace)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tools.bpe import MAX_PIECE, o200k
from tools.tokens import count_payload, encoder, tokenizer_name

if TYPE_CHECKING:
    import bpe_openai

ROOT = Path(__file__).resolve().parent.parent

SAMPLES = [
    "héllo wörld, l'été ÇA VA!! Ünïcödé",
    "日本語のテキストと한국어 그리고 русский текст; العربية",
    "emoji 😀👍🏽 👨‍👩‍👧 flags 🇩🇪",
    "I'M HERE, you've, they'LL, it's 12345678 3.14159 1,000,000",
    "\t\t  \n\n  end   \r\n\r\n   ",
    "<|endoftext|> special tokens are plain text here",
    '{"type":"function","function":{"name":"memory_search","parameters":{}}}',
    "",
]


@pytest.fixture(scope="module")
def reference() -> bpe_openai.Encoding:
    # Imported here, not at the top: its import loads its token tables (a second or more of
    # CPU), which every xdist worker collecting this file would pay for, running it or not.
    import bpe_openai

    return bpe_openai.get_encoding("o200k_base")


def corpus() -> list[str]:
    files = sorted((ROOT / "bot").rglob("*.py")) + sorted(ROOT.glob("*.md"))
    return SAMPLES + [p.read_text() for p in files]


def test_same_tokens_as_the_rust_tokenizer(reference: bpe_openai.Encoding) -> None:
    ours = o200k()
    for text in corpus():
        assert ours.encode(text) == reference.encode(text, disallowed_special=()), text[:60]


def test_token_counts_use_it() -> None:
    assert tokenizer_name() == "o200k_base"
    assert type(encoder()).__name__ == "BytePairEncoder"
    schema = [{"type": "function", "function": {"name": "x", "description": "adds"}}]
    text = json.dumps(schema, ensure_ascii=False, separators=(",", ":"))
    assert count_payload(schema) == len(o200k().encode(text)) > 5


def test_a_piece_of_any_length_is_counted_close_to_exact(reference: bpe_openai.Encoding) -> None:
    # One pre-tokenizer piece as long as a user likes (a run of one character, a blob with
    # no spaces): merged in slices, so the count is a close estimate, not a quadratic merge.
    ours = o200k()
    for text in ("x" * 50_000, "Zq9" * 3000, "é" * 4000):
        exact = len(reference.encode(text, disallowed_special=()))
        got = len(ours.encode(text))
        assert exact <= got <= exact * 1.1 + 1, (text[:10], exact, got)
    # Pieces up to MAX_PIECE bytes stay exact.
    word = "a" * MAX_PIECE
    assert ours.encode(word) == reference.encode(word, disallowed_special=())
