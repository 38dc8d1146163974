"""Speech to text through an OpenAI-compatible `/audio/transcriptions` endpoint (OpenAI,
Groq, speaches, whisper.cpp); every failure is a MediaError in one sentence for the user."""

from __future__ import annotations

import asyncio
import json
import logging
from dataclasses import dataclass

import httpx
from pydantic import SecretStr

from bot import capped
from bot.media.errors import MediaError
from bot.media.settings import Endpoint, MediaSettings, bearer, probe

log = logging.getLogger(__name__)

MAX_TRANSCRIPT_CHARS = 100_000
# The JSON around the longest transcript we keep, with room for escapes: reading stops
# past it (an endpoint's junk body was read whole).
MAX_ANSWER_BYTES = 2 * 1024 * 1024
# One transcription: a long voice note on a CPU whisper server takes about a minute.
TIMEOUT_S = 120.0
HOW_TO_ENABLE = (
    "set SPEECH_BASE_URL (and SPEECH_API_KEY, TRANSCRIBE_MODEL) to an "
    "OpenAI-compatible audio endpoint such as OpenAI, Groq or a local "
    "faster-whisper-server"
)
VOICE_OFF = f"Voice messages are off here. To turn them on, {HOW_TO_ENABLE}."


@dataclass
class Transcriber:
    http: httpx.AsyncClient
    base_url: str | None  # None: voice messages are off
    api_key: str | None
    model: str
    timeout_s: float
    # Which settings named the URL and key (None: built by hand, as in tests).
    endpoint: Endpoint | None = None

    def __post_init__(self) -> None:
        self.base_url = self.base_url.rstrip("/") if self.base_url else None

    @property
    def enabled(self) -> bool:
        return self.base_url is not None

    async def transcribe(self, data: bytes, filename: str, mime: str) -> str:
        if self.base_url is None:
            raise MediaError(VOICE_OFF)
        try:
            # httpx's timeout is per read: a service dripping bytes would hold the chat for
            # good. TIMEOUT_S is the whole call's deadline.
            async with asyncio.timeout(self.timeout_s):
                resp = await capped.post(
                    self.http,
                    f"{self.base_url}/audio/transcriptions",
                    MAX_ANSWER_BYTES,
                    headers=bearer(self.api_key),
                    files={"file": (filename, data, mime)},
                    data={"model": self.model, "response_format": "json"},
                    timeout=httpx.Timeout(self.timeout_s, connect=10.0),
                )
        except capped.TooLarge:
            log.warning("transcription endpoint answered more than %d bytes", MAX_ANSWER_BYTES)
            raise MediaError(
                "The speech-to-text service sent an answer far too large to be a transcript, "
                "so I could not hear your voice message; please write it."
            ) from None
        except (httpx.TimeoutException, TimeoutError):
            log.warning("transcription timed out after %.0f s", self.timeout_s)
            raise MediaError(
                "The speech-to-text service took too long, so I could not hear your voice "
                "message; please try again or write it."
            ) from None
        except httpx.HTTPError as exc:
            log.warning("transcription endpoint unreachable: %s", type(exc).__name__)
            raise MediaError(
                "The speech-to-text service is not reachable right now, so I could not hear "
                "your voice message; please try again later or write it."
            ) from None
        if resp.status_code in (404, 405):
            raise MediaError(
                f"This model endpoint has no speech-to-text (HTTP {resp.status_code}). "
                f"To use voice messages, {HOW_TO_ENABLE}."
            )
        if resp.status_code in (401, 403):
            check = self.endpoint.key_to_check() if self.endpoint else "SPEECH_API_KEY"
            raise MediaError(
                f"The speech-to-text service refused the request (HTTP {resp.status_code}); "
                f"the admin should check {check}."
            )
        if resp.status_code >= 400:
            log.warning("transcription failed: HTTP %s %s", resp.status_code, resp.text[:200])
            raise MediaError(
                f"The speech-to-text service failed (HTTP {resp.status_code}); please try "
                "again later or write your message."
            )
        try:
            text = json.loads(resp.content).get("text")
        except (ValueError, AttributeError):
            text = None
        if not isinstance(text, str):
            raise MediaError("The speech-to-text service gave an answer I could not read.")
        return text.strip()[:MAX_TRANSCRIPT_CHARS]

    async def probe(self) -> tuple[bool | None, str]:
        if self.base_url is None:
            return True, "off (TRANSCRIBE_MODEL=off): voice messages get one sentence"
        form = {"model": (None, self.model)}  # multipart, like a real request, minus the file
        url, about = f"{self.base_url}/audio/transcriptions", f"nothing heard; model {self.model}"
        return await probe(self.http, url, self.api_key, "speech-to-text", about, files=form)


def transcriber(
    settings: MediaSettings,
    llm_base_url: str,
    llm_api_key: SecretStr | str | None,
    http: httpx.AsyncClient,
) -> Transcriber:
    """The transcription endpoint the settings name: TRANSCRIBE_MODEL's own (`model@URL`),
    else the speech endpoint (by default the LLM endpoint); TRANSCRIBE_MODEL=off or
    SPEECH_BASE_URL=off turns voice messages off."""
    end = settings.direction(
        "TRANSCRIBE_MODEL", settings.transcribe_model, llm_base_url, llm_api_key
    )
    if end is None or settings.off(settings.transcribe_model):  # voice notes get one sentence
        return Transcriber(http, None, None, settings.transcribe_model, TIMEOUT_S)
    return Transcriber(http, end.base_url, end.api_key, end.model, TIMEOUT_S, end)
