"""A .env written for an older release, through the app `sidekick run` builds: the former
names it holds, merged into today's settings, still decide what the bot does."""

from __future__ import annotations

from datetime import UTC, datetime, time, timedelta
from typing import Any

import pytest
from sqlalchemy import update

from bot.telegram.delivery import TelegramDelivery
from bot.voice.commands import OFF_HERE
from db.models import ChatSession
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.media_helpers import voice


def latest_four_am(now: datetime) -> datetime:
    """The newest 04:00 UTC at or before `now`."""
    today = datetime.combine(now.date(), time(4, 0), tzinfo=UTC)
    return today if today <= now else today - timedelta(days=1)


async def test_an_old_split_time_and_speech_switch_still_take_effect(
    make_tg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SESSION_SPLIT_TIME", "04:00")  # now SESSION_SPLIT=daily 04:00
    monkeypatch.setenv("TTS_BASE_URL", "off")  # now TTS_MODEL=off
    tg: TG = await make_tg()
    assert tg.settings.session_split == "daily 04:00" and len(tg.settings.renamed) == 2

    await tg.send(OWNER, "/voice on")
    assert (await tg.reply(OWNER)).text == OFF_HERE
    tg.llm.add(Text("Noted."))
    await tg.send(OWNER, "I am planning a trip to Lisbon")
    assert (await tg.reply(OWNER)).text == "Noted."
    await tg.send(OWNER, "/sessions")
    assert "Sessions split every day at 04:00" in (await tg.reply(OWNER)).text
    # The session began a minute before the last 04:00: its day ended there, so the split
    # job closes it (with the former default of midnight it could still be open).
    app = tg.app
    began = latest_four_am(app.deps.clock()) - timedelta(minutes=1)
    async with app.session_factory() as s, s.begin():
        await s.execute(update(ChatSession).values(started_at=began))
    specs = await app.start_features(TelegramDelivery(tg.runtime.outbox))
    split = next(run for job_id, _, _, run in specs if job_id == "session-split")
    tg.llm.add(Text("The user is planning a trip to Lisbon."))
    assert len((await split()).archived) == 1


async def test_old_separate_speech_servers_keep_serving_their_directions(
    make_tg: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    whisper, kokoro = await FakeOpenAI().start(), await FakeOpenAI().start()
    try:
        monkeypatch.setenv("TRANSCRIBE_BASE_URL", whisper.base_url)
        monkeypatch.setenv("TRANSCRIBE_API_KEY", "sk-whisper-secret")
        monkeypatch.setenv("TTS_BASE_URL", kokoro.base_url)
        monkeypatch.setenv("TTS_MODEL", "kokoro")
        tg: TG = await make_tg()
        assert tg.settings.tts_model == f"kokoro@{kokoro.base_url}"
        assert "TRANSCRIBE_BASE_URL and TTS_BASE_URL differ" in tg.settings.renamed[0]
        whisper.transcripts.append("Remind me what I said")
        file_id = tg.server.add_file(b"OggS" + b"\0" * 100)
        await tg.send(OWNER, None, **voice(file_id, 104))
        _, text, spoken = await tg.replies(OWNER, 3)
        assert text.text == "echo: Remind me what I said" and spoken.method == "sendVoice"
        assert [t["authorization"] for t in whisper.transcriptions] == ["Bearer sk-whisper-secret"]
        assert [(s["model"], s["authorization"]) for s in kokoro.speeches] == [("kokoro", None)]
    finally:
        await whisper.stop()
        await kokoro.stop()
