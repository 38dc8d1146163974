"""`sidekick doctor` line for voice replies: the speech endpoint, probed without speaking."""

from __future__ import annotations

from bot.app import App
from tools.base import CheckResult

HINT = (
    "set TTS_BASE_URL / TTS_API_KEY / TTS_MODEL / TTS_VOICE to an OpenAI-compatible "
    "text-to-speech endpoint (OpenAI, Kokoro-FastAPI, openedai-speech), or TTS_BASE_URL=off"
)


async def check_voice(app: App) -> list[CheckResult]:
    if app.voice is None:
        return []
    synth = app.voice.synthesizer
    if synth is None:
        return [CheckResult("voice replies", True, "off (TTS_BASE_URL=off): answers are text")]
    ok, detail = await synth.probe()
    return [CheckResult("voice replies", ok, detail, HINT)]
