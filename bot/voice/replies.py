"""Whether an answer is spoken, and speaking it: the user's /voice mode, the budget check
before the call, the characters metered after it (priced from PRICES like any model)."""

from __future__ import annotations

import logging
from dataclasses import dataclass

import httpx

from bot.usage.meter import Meter
from bot.voice import repo
from bot.voice.settings import VoiceSettings
from bot.voice.speech import SpeechError, Synthesizer, synthesizer
from bot.voice.spoken import script
from db.engine import SessionFactory
from tools.chat import Completion, Usage
from tools.model_call import ModelCall
from tools.state import Kept, Key

log = logging.getLogger(__name__)

# Longer answers are spoken up to here (at a sentence end) and the voice says the rest is in
# the text: about a minute and a half of speech, well inside the API's 4096-character limit.
MAX_CHARS = 1500


@dataclass
class Spoken:
    audio: bytes
    cut: bool  # the answer was longer than MAX_CHARS: the voice says so
    chars: int


class VoiceReplies:
    def __init__(
        self, synthesizer: Synthesizer | None, session_factory: SessionFactory, meter: Meter | None
    ) -> None:
        self.synthesizer = synthesizer  # None: TTS_MODEL=off or SPEECH_BASE_URL=off
        self.sf = session_factory
        self.meter = meter
        # An endpoint without /audio/speech (a chat-only LLM server behind the default
        # SPEECH_BASE_URL) is said once, then voice stays quiet until a restart.
        self.missing = False
        self._modes: Kept[str] = Kept()  # users' /voice modes; /voice drops one

    async def wanted(self, user_id: int, kind: str) -> bool:
        """Whether an answer to a message of this kind is spoken, by the user's /voice mode
        (read only when speech is on at all)."""
        if self.synthesizer is None or self.missing:
            return False
        mode = self._modes.get(user_id)
        if mode is None:
            async with self.sf() as s:
                mode = await repo.mode_of(s, user_id)
            self._modes.put(user_id, mode)
        return not (mode == "off" or (mode == "auto" and kind != "voice"))

    def forget(self, user_id: int) -> None:
        """The user's /voice mode changed: the next answer reads it again."""
        self._modes.forget(user_id)

    async def speak(self, user_id: int, answer: str, request_id: str | None = None) -> Spoken:
        """The answer as OGG/Opus; SpeechError (one sentence's worth) when it cannot be."""
        assert self.synthesizer is not None
        text, cut = script(answer, MAX_CHARS)
        if not text:
            raise SpeechError("the answer has nothing to read aloud (only code or links)")
        if self.meter is not None:
            refusal = await self.meter.refusal(user_id)
            if refusal is not None:
                raise SpeechError(refusal.rstrip("."))
        try:
            audio = await self.synthesizer.synthesize(text)
        except SpeechError as exc:
            self.missing = exc.missing
            raise
        await self._record(user_id, len(text), request_id)
        return Spoken(audio, cut, len(text))

    async def _record(self, user_id: int, chars: int, request_id: str | None) -> None:
        """Characters count as input tokens: speech is priced per character (PRICES
        `tts-1=15/0` is OpenAI's $15 per million characters)."""
        if self.meter is None or self.synthesizer is None:
            return
        call = ModelCall("speech", user_id=user_id, request_id=request_id)
        out = Completion(model=self.synthesizer.model, usage=Usage(prompt_tokens=chars))
        try:
            async with self.sf() as s, s.begin():
                await self.meter.record(s, call, out, [])
        except Exception:  # the voice is worth more than its usage row
            log.exception("could not record the usage of a speech call")


def build_voice(
    settings: VoiceSettings,
    llm_base_url: str,
    llm_api_key: str | None,
    http: httpx.AsyncClient,
    session_factory: SessionFactory,
    meter: Meter | None,
) -> VoiceReplies:
    synth = synthesizer(settings, llm_base_url, llm_api_key, http)
    return VoiceReplies(synth, session_factory, meter)


VOICE: Key[VoiceReplies] = Key("voice.replies")
