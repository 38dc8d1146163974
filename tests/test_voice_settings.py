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


async def test_tts_model_at_url_has_its_own_server_and_no_key_of_another_host(
    tmp_path: Path,
) -> None:
    whisper = {"speech_base_url": "http://whisper.local:8080/v1", "speech_api_key": "sk-whisper"}
    kokoro = "kokoro@http://kokoro.local:8880/v1/"
    assert await built(tmp_path, tts_model=kokoro, **whisper) == (
        "http://kokoro.local:8880/v1",
        None,
    )
    # The shared endpoint's host (another path on it): its key.
    assert await built(tmp_path, tts_model="tts@http://whisper.local:8080/tts", **whisper) == (
        "http://whisper.local:8080/tts",
        "sk-whisper",
    )
    # The LLM's host: the LLM's key, as the shared endpoint would have.
    assert await built(tmp_path, tts_model=f"tts-1@{LLM}", **whisper) == (LLM, "sk-llm")
    assert await built(tmp_path, tts_model=kokoro) == ("http://kokoro.local:8880/v1", None)
    # SPEECH_BASE_URL=off is no voice at all.
    assert await built(tmp_path, tts_model=kokoro, speech_base_url="off") == (None, None)


async def test_the_model_is_sent_without_its_url(tmp_path: Path) -> None:
    settings = make_settings(tmp_path, tts_model="kokoro@http://kokoro.local:8880/v1")
    async with httpx.AsyncClient() as http:
        synth = build_voice(settings, LLM, None, http, None, None).synthesizer  # type: ignore[arg-type]
    assert synth is not None and synth.model == "kokoro"
    assert synth.endpoint is not None and synth.endpoint.said() == "from TTS_MODEL, no key sent"


@pytest.mark.parametrize(
    ("value", "error"),
    [
        ("kokoro@localhost:8880", "after @ comes the endpoint's http:// or https:// URL"),
        ("kokoro@", "after @ comes the endpoint's http:// or https:// URL"),
        ("@http://kokoro.local/v1", "the model's name comes before @"),
        ("kokoro@http://", "http:// after @ is not a URL"),
        ("off@http://kokoro.local/v1", "off turns the direction off"),
        ("kokoro@http://me:sk-secret@kokoro.local/v1", "a key inside the URL is not supported"),
        ("kokoro@http://me:sk-secret@kokoro.local:x/v1", "a key inside the URL is not supported"),
    ],
)
def test_a_model_at_a_bad_url_is_a_clear_error(tmp_path: Path, value: str, error: str) -> None:
    with pytest.raises(Exception, match=error) as info:
        make_settings(tmp_path, tts_model=value)
    assert "sk-secret" not in str(info.value)
