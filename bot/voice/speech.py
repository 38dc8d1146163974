"""Text to speech through an OpenAI-compatible `/audio/speech` endpoint.

OpenAI, Kokoro-FastAPI, openedai-speech and speaches take the same JSON body (`model`,
`input`, `voice`, `response_format`) and answer with the audio bytes. We ask for Opus,
which they wrap in OGG: exactly what Telegram plays as a voice message. An endpoint that
answers in another container (MP3, WAV...) is converted (bot/voice/convert.py).
Every failure becomes a SpeechError whose text is one sentence for the user.
"""

from __future__ import annotations

import asyncio
import logging
from dataclasses import dataclass

import httpx

from bot import capped
from bot.media.settings import Endpoint, bearer, probe
from bot.voice.convert import ConvertError, TooLong, to_ogg_opus
from bot.voice.settings import VoiceSettings, speech_off

log = logging.getLogger(__name__)

OGG_MAGIC = b"OggS"
MAX_AUDIO_BYTES = 20 * 1024 * 1024
# The longest spoken answer (replies.MAX_CHARS, 1,500 characters) plays for about two minutes;
# audio much longer than that is an endpoint's fault (a 2-hour silent FLAC was re-encoded
# for a minute and sent): refused, and its decoding stops there.
MAX_SECONDS = 5 * 60
# One synthesis of the longest spoken answer (replies.MAX_CHARS) on a CPU Kokoro server
# takes ~20 s.
TIMEOUT_S = 60.0


def too_long(seconds: float) -> SpeechError:
    log.warning("speech endpoint sent %.0f s of audio; not sent", seconds)
    return SpeechError(
        f"the speech service sent {seconds / 60:.0f} minutes of audio for an answer of at most "
        f"{MAX_SECONDS // 60} minutes; it was not sent"
    )


def ogg_seconds(data: bytes) -> float | None:
    """How long OGG/Opus audio plays, from its last page's granule position (Opus counts
    48 kHz samples whatever the input rate); None when that page does not say."""
    last = data.rfind(OGG_MAGIC)
    if last < 0 or len(data) < last + 27 or data[last + 4] != 0:  # a whole version-0 header
        return None
    granule = int.from_bytes(data[last + 6 : last + 14], "little", signed=True)
    return granule / 48_000 if granule >= 0 else None


class SpeechError(Exception):
    """Why there is no voice reply, as one sentence (the text answer is already sent).
    `missing`: the endpoint has no speech route at all (asking again will not help)."""

    def __init__(self, text: str, *, missing: bool = False) -> None:
        super().__init__(text)
        self.missing = missing


@dataclass
class Synthesizer:
    http: httpx.AsyncClient
    base_url: str
    api_key: str | None
    model: str
    voice: str
    timeout_s: float
    # Which settings named the URL and key (None: built by hand, as in tests).
    endpoint: Endpoint | None = None

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/")

    @property
    def url(self) -> str:
        return f"{self.base_url}/audio/speech"

    async def synthesize(self, text: str) -> bytes:
        """OGG/Opus bytes of `text` spoken, at most MAX_AUDIO_BYTES and MAX_SECONDS long."""
        body = {"model": self.model, "input": text, "voice": self.voice, "response_format": "opus"}
        try:
            # httpx's timeout is per read: a service dripping bytes would hold the chat for
            # good. The whole call has the deadline.
            async with asyncio.timeout(self.timeout_s):
                resp = await capped.post(
                    self.http,
                    self.url,
                    MAX_AUDIO_BYTES,
                    headers=bearer(self.api_key),
                    json=body,
                    timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                )
        except capped.TooLarge:
            log.warning("speech endpoint answered more than %d bytes; stopped", MAX_AUDIO_BYTES)
            raise SpeechError("the spoken answer came out too large to send") from None
        except (httpx.TimeoutException, TimeoutError):
            log.warning("speech synthesis timed out after %.0f s", self.timeout_s)
            raise SpeechError("the speech service took too long") from None
        except httpx.HTTPError as exc:
            log.warning("speech endpoint unreachable: %s", type(exc).__name__)
            raise SpeechError("the speech service is not reachable right now") from None
        if resp.status_code in (404, 405):
            raise SpeechError(
                f"this endpoint has no text-to-speech (HTTP {resp.status_code}); the admin "
                "can set SPEECH_BASE_URL, or TTS_MODEL=off",
                missing=True,
            )
        if resp.status_code in (401, 403):
            check = self.endpoint.key_to_check() if self.endpoint else "SPEECH_API_KEY"
            raise SpeechError(
                f"the speech service refused the request (HTTP {resp.status_code}); the admin "
                f"should check {check}"
            )
        if resp.status_code >= 400:
            log.warning("speech synthesis failed: HTTP %s %s", resp.status_code, resp.text[:200])
            raise SpeechError(f"the speech service failed (HTTP {resp.status_code})")
        data = resp.content
        if data.startswith(OGG_MAGIC):
            seconds = ogg_seconds(data)
            if seconds is not None and seconds > MAX_SECONDS:
                raise too_long(seconds)
            return data
        kind = resp.headers.get("content-type", "unknown")
        try:
            data = await asyncio.to_thread(to_ogg_opus, data, MAX_SECONDS)
        except TooLong as exc:
            raise too_long(exc.seconds) from None
        except ConvertError as exc:
            log.warning("speech endpoint answered %s, not convertible: %s", kind, exc)
            raise SpeechError(
                f"the speech service sent {kind} audio that could not be turned into "
                "OGG/Opus, which Telegram needs for a voice message"
            ) from None
        if len(data) > MAX_AUDIO_BYTES:
            raise SpeechError("the spoken answer came out too large to send")
        return data

    async def probe(self) -> tuple[bool | None, str]:
        body = {"model": self.model, "voice": self.voice}  # no `input`: nothing is spoken
        about = f"nothing synthesised; model {self.model}, voice {self.voice}"
        return await probe(self.http, self.url, self.api_key, "text-to-speech", about, json=body)


def synthesizer(
    settings: VoiceSettings, llm_base_url: str, llm_api_key: str | None, http: httpx.AsyncClient
) -> Synthesizer | None:
    """The speech endpoint the settings name: TTS_MODEL's own (`model@URL`), else the shared
    one (None: TTS_MODEL=off or SPEECH_BASE_URL=off)."""
    end = settings.direction("TTS_MODEL", settings.tts_model, llm_base_url, llm_api_key)
    if end is None or speech_off(settings):
        return None
    return Synthesizer(
        http, end.base_url, end.api_key, end.model, settings.tts_voice, TIMEOUT_S, end
    )
