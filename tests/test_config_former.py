"""A .env written for the settings an older release had: each former name is read once,
translated into the setting that replaced it, and named in one warning line (by the CLI
before anything starts, and by `sidekick doctor`); what cannot be carried over is one
configuration error naming it."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.app import build_app
from bot.config import Settings, load_settings, settings_and_errors, unknown_names
from bot.errors import ConfigError
from bot.ops.doctor import check_settings
from bot.ops.former_settings import RENAMED
from tests.conftest import make_settings
from tests.fakes.openai_server import FakeOpenAI
from tests.test_config import sidekick

OLD_ENV = """\
LLM_MODEL=gpt-4o-mini
LLM_MODELS=gpt-4o, gpt-4o-mini
SESSION_SPLIT=weekly
SESSION_SPLIT_TIME=4:30
CODE_PRIVATE_NETWORKS=on
CODE_GENERATE_TIMEOUT_S=900
CODE_GENERATE_MEMORY_MB=2048
TRANSCRIBE_BASE_URL=http://speech.local:8000/v1/
TRANSCRIBE_API_KEY=sk-speech-secret
TTS_BASE_URL=off
DAILY_BUDGET_USD=5
MONTHLY_BUDGET_USD=100.5
USER_DAILY_TOKEN_CAP=50000
USER_MONTHLY_TOKEN_CAP=1000000
EMBEDDINGS=openai
EMBEDDINGS_MODEL=nomic-embed-text
"""


def test_every_former_name_is_read_as_its_replacement(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(OLD_ENV)
    s, errors = settings_and_errors()
    assert errors == []
    assert (s.llm_model, s.llm_models) == ("gpt-4o-mini", ("gpt-4o",))
    assert (s.session_split, s.split_period, s.split_time) == ("weekly 04:30", "weekly", "04:30")
    assert s.code_network == "all"
    assert s.speech_base_url == "http://speech.local:8000/v1"
    assert s.speech_api_key is not None
    assert s.speech_api_key.get_secret_value() == "sk-speech-secret"
    assert "sk-speech-secret" in s.secrets()  # still scrubbed from logs and replies
    assert (s.tts_model, s.transcribe_model) == ("off", "whisper-1")
    assert s.budget_usd == "5/day, 100.5/month"
    assert (s.daily_budget_usd, s.monthly_budget_usd) == (5.0, 100.5)
    assert s.user_token_cap == "50000/day, 1000000/month"
    assert (s.user_daily_token_cap, s.user_monthly_token_cap) == (50_000, 1_000_000)
    assert (s.embeddings, s.embeddings_model) == ("nomic-embed-text", "nomic-embed-text")
    # One warning line per former name, naming what to write instead; never the key.
    lines = s.renamed
    assert sorted(line.split(":")[1].split()[0].split("=")[0] for line in lines) == sorted(
        name for name in RENAMED if f"\n{name}=" in "\n" + OLD_ENV
    )
    assert all(line.startswith(".env: ") for line in lines)
    assert ".env: SESSION_SPLIT_TIME is replaced by SESSION_SPLIT: read as " in "\n".join(lines)
    assert "SESSION_SPLIT=weekly 04:30; write that instead" in "\n".join(lines)
    assert "CODE_PRIVATE_NETWORKS=on is replaced by CODE_NETWORK: read as CODE_NETWORK=all" in (
        "\n".join(lines)
    )
    assert "TTS_BASE_URL=off is replaced by TTS_MODEL: read as TTS_MODEL=off" in "\n".join(lines)
    assert "read as BUDGET_USD=5/day, 100.5/month" in "\n".join(lines)
    assert "read as LLM_MODEL=gpt-4o-mini, gpt-4o" in "\n".join(lines)
    assert "sk-speech-secret" not in "\n".join(lines)
    # The misspelling check leaves them to these lines.
    assert unknown_names() == []


def test_two_speech_servers_become_speech_base_url_and_tts_model_at_its_url(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # whisper.cpp's server for voice notes, Kokoro-FastAPI for voice replies.
    monkeypatch.setenv("TTS_BASE_URL", "http://127.0.0.1:8880/v1/")
    (tmp_path / ".env").write_text(
        "LLM_BASE_URL=https://api.openai.com/v1\nLLM_API_KEY=sk-llm\nTTS_MODEL=kokoro\n"
        "TRANSCRIBE_BASE_URL=http://127.0.0.1:8080/v1\nTRANSCRIBE_API_KEY=sk-whisper\n"
    )
    s = load_settings()
    assert (s.speech_base_url, s.tts_model) == (
        "http://127.0.0.1:8080/v1",
        "kokoro@http://127.0.0.1:8880/v1",
    )
    assert s.speech_api_key is not None and s.speech_api_key.get_secret_value() == "sk-whisper"
    assert s.renamed == (
        ".env and environment: TRANSCRIBE_BASE_URL and TTS_BASE_URL differ and are replaced by "
        "SPEECH_BASE_URL and TTS_MODEL: read as SPEECH_BASE_URL=http://127.0.0.1:8080/v1 and "
        "TTS_MODEL=kokoro@http://127.0.0.1:8880/v1; write that instead",
        ".env: TRANSCRIBE_API_KEY is replaced by SPEECH_API_KEY: read as SPEECH_API_KEY (the "
        "same key); write that instead",
    )
    # Each direction on its own server, and the key only on the one it was set for.
    stt = s.direction("TRANSCRIBE_MODEL", s.transcribe_model, s.llm_base_url, s.llm_api_key)
    tts = s.direction("TTS_MODEL", s.tts_model, s.llm_base_url, s.llm_api_key)
    assert stt is not None and tts is not None
    assert (stt.base_url, stt.api_key, stt.model) == (
        "http://127.0.0.1:8080/v1",
        "sk-whisper",
        "whisper-1",
    )
    assert (tts.base_url, tts.api_key, tts.model) == ("http://127.0.0.1:8880/v1", None, "kokoro")


def test_a_tts_key_on_the_transcription_servers_host_is_that_servers_key(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(
        "TRANSCRIBE_BASE_URL=http://speech.local:8000/v1\n"
        "TTS_BASE_URL=http://speech.local:8000/tts/v1\nTTS_API_KEY=sk-speech\n"
    )
    s = load_settings()
    assert (s.speech_base_url, s.tts_model) == (
        "http://speech.local:8000/v1",
        "tts-1@http://speech.local:8000/tts/v1",
    )
    tts = s.direction("TTS_MODEL", s.tts_model, s.llm_base_url, s.llm_api_key)
    assert tts is not None and tts.api_key == "sk-speech"


def test_two_servers_with_voice_replies_off_keep_only_the_transcription_one(
    tmp_path: Path,
) -> None:
    (tmp_path / ".env").write_text(
        "TRANSCRIBE_BASE_URL=http://a.local/v1\nTTS_BASE_URL=http://b.local/v1\n"
        "TTS_API_KEY=sk-two\nTTS_MODEL=off\n"
    )
    s = load_settings()
    assert (s.speech_base_url, s.tts_model, s.speech_api_key) == ("http://a.local/v1", "off", None)
    assert ".env: TTS_API_KEY is no longer a setting (TTS_MODEL=off turns that direction off)" in (
        "\n".join(s.renamed)
    )


@pytest.mark.parametrize(
    ("env", "speech_base_url", "tts_model", "stt", "tts"),
    [
        # Kokoro for voice replies; voice notes stayed on the LLM endpoint, with its key.
        (
            "TTS_BASE_URL=http://kokoro.local:8880/v1\nTTS_MODEL=kokoro\n",
            None,
            "kokoro@http://kokoro.local:8880/v1",
            ("https://api.openai.com/v1", "sk-llm"),
            ("http://kokoro.local:8880/v1", None),
        ),
        # Groq for voice notes; voice replies stayed on the LLM endpoint, with its key.
        (
            "TRANSCRIBE_BASE_URL=https://api.groq.com/openai/v1\nTRANSCRIBE_API_KEY=gsk-groq\n",
            "https://api.groq.com/openai/v1",
            "tts-1@https://api.openai.com/v1",
            ("https://api.groq.com/openai/v1", "gsk-groq"),
            ("https://api.openai.com/v1", "sk-llm"),
        ),
    ],
)
def test_one_former_speech_url_keeps_the_other_direction_on_the_llm_endpoint(
    tmp_path: Path,
    env: str,
    speech_base_url: str | None,
    tts_model: str,
    stt: tuple[str, str | None],
    tts: tuple[str, str | None],
) -> None:
    (tmp_path / ".env").write_text(
        f"LLM_BASE_URL=https://api.openai.com/v1/\nLLM_API_KEY=sk-llm\n{env}"
    )
    s = load_settings()
    assert (s.speech_base_url, s.tts_model) == (speech_base_url, tts_model)
    assert "stay on the LLM endpoint" in s.renamed[0]
    heard = s.direction("TRANSCRIBE_MODEL", s.transcribe_model, s.llm_base_url, s.llm_api_key)
    said = s.direction("TTS_MODEL", s.tts_model, s.llm_base_url, s.llm_api_key)
    assert heard is not None and (heard.base_url, heard.api_key) == stt
    assert said is not None and (said.base_url, said.api_key) == tts


def test_the_environment_is_read_too_and_the_new_name_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("DAILY_BUDGET_USD", "3")
    monkeypatch.setenv("SESSION_SPLIT_TIME", "06:00")
    (tmp_path / ".env").write_text("BUDGET_USD=7/month\nSESSION_SPLIT=daily 05:00\n")
    s = load_settings()
    assert (s.budget_usd, s.session_split) == ("7/month", "daily 05:00")
    assert s.renamed == (
        "environment: SESSION_SPLIT_TIME is no longer a setting (SESSION_SPLIT=daily 05:00 "
        "says the time, so its value is not used); remove it",
        "environment: DAILY_BUDGET_USD is no longer a setting (BUDGET_USD replaces it and is "
        "set, so its value is not used); remove it",
    )


@pytest.mark.parametrize(
    ("env", "error"),
    [
        (
            "TRANSCRIBE_BASE_URL=http://a.local/v1\nTTS_BASE_URL=http://b.local/v1\n"
            "TTS_API_KEY=sk-two\n",
            "TTS_API_KEY: the text-to-speech server http://b.local/v1 needs its own key, and "
            "only SPEECH_BASE_URL's server gets one now: write SPEECH_BASE_URL=http://b.local/v1,"
            " SPEECH_API_KEY=<your TTS_API_KEY> and TRANSCRIBE_MODEL=whisper-1@http://a.local/v1",
        ),
        (
            "TRANSCRIBE_BASE_URL=http://a.local/v1\nTTS_BASE_URL=http://b.local/v1\n"
            "TRANSCRIBE_API_KEY=sk-one\nTTS_API_KEY=sk-two\n",
            "TRANSCRIBE_API_KEY and TTS_API_KEY: servers http://a.local/v1 and http://b.local/v1 "
            "each need a key",
        ),
        (
            "TTS_BASE_URL=http://kokoro.local/v1\nTTS_API_KEY=sk-two\n",
            "TTS_API_KEY: the text-to-speech server http://kokoro.local/v1 needs its own key, "
            "and only SPEECH_BASE_URL's server gets one now: write SPEECH_BASE_URL=http://"
            "kokoro.local/v1, SPEECH_API_KEY=<your TTS_API_KEY> and "
            "TRANSCRIBE_MODEL=whisper-1@https://api.openai.com/v1",
        ),
        ("TTS_MODEL=kokoro@localhost:8880/v1\n", "TTS_MODEL: after @ comes the endpoint's http"),
        ("TTS_MODEL=@http://b.local/v1\n", "TTS_MODEL: the model's name comes before @"),
        ("TTS_MODEL=kokoro@http://b.local:port/v1\n", "TTS_MODEL: http://b.local:port/v1 after @"),
        (
            "TRANSCRIBE_MODEL=whisper@http://me:sk-one@a.local/v1\n",
            "TRANSCRIBE_MODEL: a key inside the URL is not supported",
        ),
        (
            "TRANSCRIBE_API_KEY=sk-one\nTTS_API_KEY=sk-two\n",
            "TRANSCRIBE_API_KEY and TTS_API_KEY differ, and one SPEECH_API_KEY serves",
        ),
        ("TTS_BASE_URL=tts.local\n", "TTS_BASE_URL: must start with http:// or https://"),
        ("CODE_GENERATE_TIMEOUT_S=3600\n", "CODE_GENERATE_TIMEOUT_S: is no longer a setting and"),
        ("CODE_GENERATE_MEMORY_MB=4096\n", "CODE_GENERATE_MEMORY_MB: is no longer a setting and"),
        ("CODE_PRIVATE_NETWORKS=yes\n", "CODE_PRIVATE_NETWORKS: must be on or off"),
        ("SESSION_SPLIT_TIME=25:00\n", "SESSION_SPLIT_TIME: must be HH:MM"),
        ("USER_DAILY_TOKEN_CAP=1.5\n", "USER_DAILY_TOKEN_CAP: must be a whole number of tokens"),
        ("MONTHLY_BUDGET_USD=lots\n", "MONTHLY_BUDGET_USD: must be a number of USD"),
    ],
)
def test_a_value_that_cannot_be_carried_over_is_one_error_line(
    tmp_path: Path, env: str, error: str
) -> None:
    (tmp_path / ".env").write_text(env)
    with pytest.raises(ConfigError) as info:
        load_settings()
    (line,) = str(info.value).splitlines()
    assert line.startswith(error)
    assert "sk-one" not in line and "sk-two" not in line


def test_the_merged_values_take_their_short_forms() -> None:
    s = load_settings(
        session_split="Weekly", budget_usd="100/month,5/day", user_token_cap="1_000/day"
    )
    assert (s.session_split, s.budget_usd, s.user_token_cap) == (
        "weekly 00:00",
        "5/day, 100/month",
        "1000/day",
    )
    assert load_settings(session_split="off").session_split == "none"
    assert load_settings(embeddings="OpenAI").embeddings_model == "text-embedding-3-small"
    assert load_settings(embeddings="wordllama").embeddings_model is None
    assert Settings.model_fields.keys() >= {"session_split", "budget_usd", "speech_base_url"}
    # 40 when the settings were cut from 50; since then a feature adds only what a person
    # must choose: the dashboard's DASHBOARD and DASHBOARD_URL, LLM_CONSTRAINED_CALLS.
    assert len(Settings.model_fields) <= 43


@pytest.mark.db
def test_the_cli_warns_once_per_former_name_and_starts(tmp_path: Path) -> None:
    (tmp_path / ".env").write_text(OLD_ENV)
    proc = sidekick(tmp_path, "bot.cli", "migrate", DATA_DIR=str(tmp_path / "d"))
    assert proc.returncode == 0, proc.stderr
    warnings = [line for line in proc.stderr.splitlines() if "sidekick: warning:" in line]
    former = [name for name in RENAMED if f"\n{name}=" in "\n" + OLD_ENV]
    assert len(warnings) == len(former)
    for name in former:
        (line,) = [w for w in warnings if f" {name} is " in w or f" {name}=" in w]
        assert "write that instead" in line or "remove it" in line
    assert "is not a setting" not in proc.stderr and "sk-speech-secret" not in proc.stderr


@pytest.mark.db
async def test_doctor_lists_the_former_names(
    tmp_path: Path, fake_llm: FakeOpenAI, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_SPLIT_TIME", "04:00")
    monkeypatch.setenv("LLM_MODELS", "big-model")
    app = await build_app(make_settings(tmp_path, fake_llm))
    try:
        rows = [r for r in await check_settings(app) if r.name == "former setting"]
    finally:
        await app.close()
    assert [r.ok for r in rows] == [True, True]
    assert [r.detail for r in rows] == [
        "environment: SESSION_SPLIT_TIME is replaced by SESSION_SPLIT: read as "
        "SESSION_SPLIT=daily 04:00; write that instead",
        "environment: LLM_MODELS is replaced by LLM_MODEL (the default model first): read as "
        "LLM_MODEL=fake-model, big-model; write that instead",
    ]
