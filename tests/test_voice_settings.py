"""Where voice replies are synthesised and with which key (bot/voice/replies.build_voice)."""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from bot.voice.replies import build_voice
from tests.conftest import make_settings

LLM = "http://llm.local/v1"


async def built(tmp_path: Path, **extra: str) -> tuple[str | None, str | None]:
    settings = make_settings(tmp_path, llm_base_url=LLM, **extra)
    async with httpx.AsyncClient() as http:
        voice = build_voice(settings, LLM, "sk-llm", http, None, None)  # type: ignore[arg-type]
    synth = voice.synthesizer
    return (synth.base_url, synth.api_key) if synth else (None, None)


async def test_defaults_to_the_llm_endpoint_and_key(tmp_path: Path) -> None:
    assert await built(tmp_path) == (LLM, "sk-llm")


async def test_the_llm_key_never_goes_to_another_host(tmp_path: Path) -> None:
    assert await built(tmp_path, speech_base_url="http://tts.local:8880/v1") == (
        "http://tts.local:8880/v1",
        None,
    )
    assert await built(
        tmp_path, speech_base_url="http://tts.local/v1", speech_api_key="sk-tts"
    ) == (
        "http://tts.local/v1",
        "sk-tts",
    )


async def test_off_turns_voice_replies_off(tmp_path: Path) -> None:
    assert await built(tmp_path, tts_model="off") == (None, None)
    assert await built(tmp_path, speech_base_url="off") == (None, None)


def test_a_bad_url_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(Exception, match="http:// or https://"):
        make_settings(tmp_path, speech_base_url="tts.local")
