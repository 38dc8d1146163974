"""Voice replies end to end: a voice note in, the fake speech endpoint's bytes out as
sendVoice beside the text; /voice modes; failures cost one sentence and never the text."""

from __future__ import annotations

import io
import math
import struct
import wave
from collections.abc import Awaitable, Callable
from typing import Any

import av
from sqlalchemy import select

from bot.usage.models import ModelUsage
from bot.voice import replies
from db.models.core import User
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.media_helpers import voice

OGG = b"OggS\x00\x02fake-opus-voice"


async def send_voice_note(tg: TG, transcript: str, user: int = OWNER) -> None:
    file_id = tg.server.add_file(b"OggS" + b"\0" * 100)
    tg.llm.transcripts.append(transcript)
    await tg.send(user, None, **voice(file_id, 104))


async def speech_rows(tg: TG) -> list[ModelUsage]:
    async with tg.app.session_factory() as s:
        rows = await s.execute(select(ModelUsage).where(ModelUsage.purpose == "speech"))
        return list(rows.scalars())


async def test_voice_note_gets_its_text_and_a_voice_reply(
    make_tg: Callable[..., Awaitable[TG]],
) -> None:
    tg = await make_tg(prices="tts-1=15/0")  # speech characters priced as input tokens
    await send_voice_note(tg, "How warm is it?")
    quote, text, spoken = await tg.replies(OWNER, 3)
    assert quote.text.startswith("🎤") and text.text == "echo: How warm is it?"
    assert spoken.method == "sendVoice" and spoken.document == OGG and spoken.text == ""
    body = tg.llm.speeches[0]
    assert body["input"] == "echo: How warm is it?" and body["response_format"] == "opus"
    assert (body["model"], body["voice"]) == ("tts-1", "alloy")
    assert body["authorization"] == "Bearer sk-test-secret-key-123456"  # the LLM key by default
    await tg.idle()
    (row,) = await speech_rows(tg)
    chars = len("echo: How warm is it?")
    assert (row.model, row.prompt_tokens, row.completion_tokens) == ("tts-1", chars, 0)
    assert row.cost_usd is not None and abs(row.cost_usd - chars * 15 / 1_000_000) < 1e-12


async def test_text_gets_text_only_in_auto_and_voice_when_on(tg: TG) -> None:
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "echo: hello"
    await tg.idle()
    assert tg.unread(OWNER) == [] and tg.llm.speeches == []
    await tg.send(OWNER, "/voice on")
    assert "every answer" in (await tg.reply(OWNER)).text
    await tg.send(OWNER, "hello again")
    text, spoken = await tg.replies(OWNER, 2)
    assert text.text == "echo: hello again" and spoken.method == "sendVoice"
    await tg.send(OWNER, "/voice off")
    await tg.reply(OWNER)
    await send_voice_note(tg, "quiet please")
    await tg.replies(OWNER, 2)  # the quote and the text
    await tg.idle()
    assert tg.unread(OWNER) == [] and len(tg.llm.speeches) == 1
    await tg.send(OWNER, "/voice")
    assert (await tg.reply(OWNER)).text.startswith("Voice replies: off.")
    await tg.send(OWNER, "/voice loud")
    assert (await tg.reply(OWNER)).text.startswith("Usage: /voice on|off|auto")


async def test_speech_endpoint_down_gives_the_text_and_one_sentence(make_tg: Any) -> None:
    # Voice notes and voice replies share the endpoint: a text asked for with /voice on.
    tg: TG = await make_tg(speech_base_url="http://127.0.0.1:9/v1")
    await tg.send(OWNER, "/voice on")
    await tg.reply(OWNER)
    await tg.send(OWNER, "Are you there?")
    text, notice = await tg.replies(OWNER, 2)
    assert text.text == "echo: Are you there?"
    assert notice.method == "sendMessage"
    assert notice.text == (
        "No voice reply this time: the speech service is not reachable right now; "
        "the answer is above."
    )
    await tg.idle()
    assert tg.unread(OWNER) == [] and await speech_rows(tg) == []


async def test_endpoint_without_speech_is_said_once(tg: TG) -> None:
    tg.llm.speech_error = 404
    await send_voice_note(tg, "one")
    *_, notice = await tg.replies(OWNER, 3)
    assert "no text-to-speech (HTTP 404)" in notice.text and "SPEECH_BASE_URL" in notice.text
    await send_voice_note(tg, "two")
    await tg.replies(OWNER, 2)
    await tg.idle()
    assert tg.unread(OWNER) == [] and len(tg.llm.speeches) == 1


async def test_code_and_links_are_not_read_and_long_answers_say_so(
    make_tg: Any, monkeypatch: Any
) -> None:
    monkeypatch.setattr(replies, "MAX_CHARS", 200)
    tg: TG = await make_tg()
    answer = (
        "Here is **the** fix, see [the docs](https://example.com/docs) or https://x.org.\n\n"
        "```python\nprint('secret code')\n```\n\n" + "This sentence is long enough. " * 20
    )
    tg.llm.add(Text(answer))
    await send_voice_note(tg, "fix it")
    *_, spoken = await tg.replies(OWNER, 3)
    said = tg.llm.speeches[0]["input"]
    assert said.startswith("Here is the fix, see the docs or")
    assert "https" not in said and "print" not in said and "**" not in said
    assert said.endswith("the rest is in the text.") and len(said) <= 200
    assert spoken.method == "sendVoice" and "the rest is in the text above" in spoken.text


async def test_a_used_up_budget_refuses_the_voice_not_the_text(make_tg: Any) -> None:
    tg: TG = await make_tg(user_token_cap="5/day")
    await send_voice_note(tg, "spend it")
    _quote, text, notice = await tg.replies(OWNER, 3)
    assert text.text.startswith("echo: spend it")
    assert notice.text.startswith("No voice reply this time: You have used your 5 tokens")
    await tg.idle()
    assert tg.llm.speeches == [] and await speech_rows(tg) == []


def wav_tone(seconds: float = 0.5, rate: int = 22_050) -> bytes:
    """What a speech server that cannot give Opus sends: 16-bit stereo PCM in a WAV file."""
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(2), w.setsampwidth(2), w.setframerate(rate)
        samples = (int(8000 * math.sin(i / 8)) for i in range(int(seconds * rate)))
        w.writeframes(b"".join(struct.pack("<hh", s, 0) for s in samples))
    return buf.getvalue()


async def test_wav_audio_is_sent_as_an_ogg_opus_voice(tg: TG) -> None:
    tg.llm.speech_audio, tg.llm.speech_type = wav_tone(), "audio/wav"
    await send_voice_note(tg, "wav please")
    *_, spoken = await tg.replies(OWNER, 3)
    assert spoken.method == "sendVoice" and spoken.document is not None
    assert spoken.document.startswith(b"OggS") and b"OpusHead" in spoken.document[:100]
    with av.open(io.BytesIO(spoken.document)) as got:
        (stream,) = got.streams.audio
        assert (stream.codec_context.name, stream.rate, stream.channels) == ("opus", 48_000, 1)
        assert got.duration is not None and 0.4 < got.duration / 1e6 < 0.7


async def test_audio_that_cannot_be_converted_is_reported_not_sent(tg: TG) -> None:
    tg.llm.speech_audio, tg.llm.speech_type = b"ID3 but no frames", "audio/mpeg"
    await send_voice_note(tg, "mp3 please")
    *_, notice = await tg.replies(OWNER, 3)
    assert "audio/mpeg" in notice.text and "OGG/Opus" in notice.text
    assert all(m.method != "sendVoice" for m in tg.server.sent_to(OWNER))


async def test_doctor_probes_without_synthesising(tg: TG) -> None:
    from bot.ops.doctor import all_checks
    from bot.voice.doctor import check as check_voice

    # The voice and media lines come from their features' declarations.
    names = [c.__name__ for c in all_checks(tg.app.features)]
    assert {"check_voice", "check_media"} <= set(names)
    (check,) = await check_voice(tg.app)
    assert check.ok and "nothing synthesised" in check.detail
    assert tg.llm.speeches and "input" not in tg.llm.speeches[0]
    await tg.restart(speech_base_url="http://127.0.0.1:9/v1")
    (check,) = await check_voice(tg.app)
    assert not check.ok and "ConnectError" in check.detail
    await tg.restart(tts_model="off")
    (check,) = await check_voice(tg.app)
    assert check.ok and "off" in check.detail


async def test_each_group_member_has_their_own_voice_mode(make_tg: Any) -> None:
    tg: TG = await make_tg(group_replies="all")
    group, member = -100777, 2001
    await tg.send(OWNER, "/voice on", chat_id=group)
    assert "every answer" in (await tg.reply(group)).text
    await tg.send(member, "mine is text", chat_id=group)
    assert (await tg.reply(group)).text == "echo: mine is text"
    await tg.idle()
    assert tg.unread(group) == []
    await tg.send(OWNER, "mine is spoken", chat_id=group)
    text, spoken = await tg.replies(group, 2)
    assert text.text == "echo: mine is spoken" and spoken.method == "sendVoice"
    (row,) = await speech_rows(tg)
    async with tg.app.session_factory() as s:
        owner = (await s.execute(select(User).where(User.telegram_id == OWNER))).scalar_one()
    assert row.user_id == owner.id  # metered to the member who asked


def silent_flac(seconds: int, rate: int = 8_000) -> bytes:
    """Hours of silence in a small FLAC file (it compresses to almost nothing)."""
    import numpy as np

    buf = io.BytesIO()
    with av.open(buf, "w", format="flac") as out:
        stream = out.add_stream("flac", rate=rate, layout="mono")
        block = np.zeros((1, rate * 60), dtype=np.int16)  # a minute a frame
        for minute in range(seconds // 60):
            frame = av.AudioFrame.from_ndarray(block, format="s16", layout="mono")
            frame.sample_rate, frame.pts = rate, minute * rate * 60
            for packet in stream.encode(frame):
                out.mux(packet)
        for packet in stream.encode(None):
            out.mux(packet)
    return buf.getvalue()


async def speak_hello(tg: TG) -> Any:
    await tg.send(OWNER, "/voice on")
    await tg.reply(OWNER)
    await tg.send(OWNER, "hello")
    text, notice = await tg.replies(OWNER, 2)
    assert text.text == "echo: hello"
    return notice


async def test_hours_of_audio_from_the_speech_endpoint_are_refused_not_sent(tg: TG) -> None:
    tg.llm.speech_audio, tg.llm.speech_type = silent_flac(2 * 3600), "audio/flac"
    assert len(tg.llm.speech_audio) < 2_000_000  # small, and two hours long
    notice = await speak_hello(tg)
    assert notice.method == "sendMessage"
    assert "120 minutes of audio" in notice.text and "not sent" in notice.text
    assert all(m.method != "sendVoice" for m in tg.server.sent_to(OWNER))


async def test_ogg_that_says_it_plays_for_hours_is_refused(tg: TG) -> None:
    # Two OGG page headers (27 bytes each, no segments); the last one's granule position
    # (48 kHz samples) says two hours.
    def page(kind: int, granule: int) -> bytes:
        return b"OggS\x00" + bytes([kind]) + granule.to_bytes(8, "little") + bytes(13)

    tg.llm.speech_audio = page(2, 0) + page(4, 2 * 3600 * 48_000)
    notice = await speak_hello(tg)
    assert "120 minutes of audio" in notice.text
    assert all(m.method != "sendVoice" for m in tg.server.sent_to(OWNER))


JUNK = 64 * 1024 * 1024


async def test_a_huge_speech_answer_is_not_read_past_the_cap(tg: TG) -> None:
    tg.llm.junk_bytes = JUNK
    notice = await speak_hello(tg)
    assert notice.text == (
        "No voice reply this time: the spoken answer came out too large to send; "
        "the answer is above."
    )
    assert tg.llm.junk_sent < JUNK // 2  # the reader stopped and hung up


async def test_a_huge_transcription_answer_is_not_read_past_the_cap(tg: TG) -> None:
    tg.llm.junk_bytes = JUNK
    file_id = tg.server.add_file(b"OggS" + b"\0" * 100)
    await tg.send(OWNER, None, **voice(file_id, 104))
    reply = await tg.reply(OWNER)
    assert "far too large to be a transcript" in reply.text
    assert tg.llm.junk_sent < JUNK // 2


async def test_doctor_says_not_offered_when_the_model_endpoint_has_no_audio(tg: TG) -> None:
    """OpenRouter or Ollama as LLM_BASE_URL: no /audio routes. A correct install passes."""
    from bot.media.doctor import check_media
    from bot.voice.doctor import check as check_voice

    tg.llm.speech_error = tg.llm.transcribe_error = 404
    (voice_line,) = await check_voice(tg.app)
    transcription = (await check_media(tg.app))[0]
    for line in (voice_line, transcription):
        assert line.ok and line.detail.startswith("not offered"), line
    # Named on purpose, an endpoint without the route is a fault.
    await tg.restart(speech_base_url=tg.llm.base_url)
    (voice_line,) = await check_voice(tg.app)
    assert not voice_line.ok and "HTTP 404" in voice_line.detail
    assert not (await check_media(tg.app))[0].ok


async def test_two_speech_servers_each_get_their_direction_and_only_their_key(
    make_tg: Any,
) -> None:
    """whisper.cpp's server for voice notes (SPEECH_BASE_URL, with its key), Kokoro-FastAPI
    for voice replies (TTS_MODEL=kokoro@URL): two servers, the key only where it was set."""
    from bot.media.doctor import check_media
    from bot.voice.doctor import check as check_voice

    whisper, kokoro = await FakeOpenAI().start(), await FakeOpenAI().start()
    try:
        tg: TG = await make_tg(
            speech_base_url=whisper.base_url,
            speech_api_key="sk-whisper-secret",
            transcribe_model="ggml-base",
            tts_model=f"kokoro@{kokoro.base_url}/",
            tts_voice="af_bella",
        )
        whisper.transcripts.append("What time is it in Lisbon?")
        file_id = tg.server.add_file(b"OggS" + b"\0" * 100)
        await tg.send(OWNER, None, **voice(file_id, 104))
        quote, text, spoken = await tg.replies(OWNER, 3)
        assert quote.text.startswith("🎤") and text.text == "echo: What time is it in Lisbon?"
        assert spoken.method == "sendVoice" and spoken.document == OGG
        (heard,) = whisper.transcriptions
        assert (heard["model"], heard["authorization"]) == ("ggml-base", "Bearer sk-whisper-secret")
        (said,) = kokoro.speeches
        assert (said["model"], said["voice"]) == ("kokoro", "af_bella")
        assert said["input"] == "echo: What time is it in Lisbon?"
        assert said["authorization"] is None  # another server: SPEECH_API_KEY is not its key
        assert whisper.speeches == [] and kokoro.transcriptions == []
        assert tg.llm.speeches == [] and tg.llm.transcriptions == []
        # The LLM's own key stays on the LLM's endpoint.
        assert set(tg.llm.authorizations) == {"Bearer sk-test-secret-key-123456"}

        # doctor names each direction's endpoint and where its key comes from, never the key.
        transcription = (await check_media(tg.app))[0]
        (voice_line,) = await check_voice(tg.app)
        assert transcription.ok and voice_line.ok
        assert transcription.detail.startswith(f"{whisper.base_url}/audio/transcriptions")
        assert transcription.detail.endswith("(from SPEECH_BASE_URL, SPEECH_API_KEY sent)")
        assert voice_line.detail.startswith(f"{kokoro.base_url}/audio/speech answers")
        assert voice_line.detail.endswith("(from TTS_MODEL, no key sent)")
        assert "sk-whisper-secret" not in transcription.detail + voice_line.detail
        assert kokoro.speeches[-1]["authorization"] is None

        # A Kokoro behind a key: the admin is told it is sent none, and why.
        kokoro.speech_error = 401
        whisper.transcripts.append("And now?")
        await tg.send(OWNER, None, **voice(tg.server.add_file(b"OggS" + b"\0" * 100), 104))
        *_, notice = await tg.replies(OWNER, 3)
        assert "refused the request (HTTP 401)" in notice.text
        assert "TTS_MODEL: its server was sent no key" in notice.text
    finally:
        await whisper.stop()
        await kokoro.stop()
