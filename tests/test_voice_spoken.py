"""What of an answer is read aloud (bot/voice/spoken.py)."""

from __future__ import annotations

from bot.voice.spoken import CUT_NOTE, clip, script, speakable


def test_code_links_and_marks_are_left_out() -> None:
    md = (
        "# Title\n- **bold** item with `ls -l`\n- see [docs](https://a.b/c)\n"
        "> quoted https://x.y/z end\n```\nrm -rf /\n```\n1. _last_ one"
    )
    said = speakable(md)
    assert "rm -rf" not in said and "https" not in said and "a.b" not in said
    assert "**" not in said and "#" not in said and "`" not in said
    assert "bold item with ls -l" in said and "see docs" in said
    assert "(code in the text)" in said and said.endswith("last one")


def test_an_unclosed_fence_hides_the_rest() -> None:
    assert speakable("Try this:\n```py\nprint(1)") == "Try this:\n(code in the text)"


def test_short_text_is_spoken_whole() -> None:
    assert script("Hello there.", 100) == ("Hello there.", False)


def test_long_text_stops_at_a_sentence_and_says_so() -> None:
    text = "One two three. " * 40
    said, cut = script(text, 120)
    assert cut and said.endswith(CUT_NOTE) and len(said) <= 120
    assert said.split("\n")[0].endswith("three.")


def test_clip_without_sentences_cuts_at_a_space() -> None:
    head, cut = clip("word " * 100, 50)
    assert cut and head.endswith("word…") and len(head) <= 51
