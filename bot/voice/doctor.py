"""`sidekick doctor` line for voice replies: the speech endpoint, probed without speaking."""

from __future__ import annotations

from bot.llm.settings import ModelSettings
from bot.media.doctor import probe_line
from bot.voice.settings import VoiceSettings
from bot.voice.speech import synthesizer
from tools.base import CheckResult
from tools.feature import Host

HINT = (
    "set SPEECH_BASE_URL / SPEECH_API_KEY / TTS_MODEL / TTS_VOICE to an OpenAI-compatible "
    "text-to-speech endpoint (OpenAI, Kokoro-FastAPI, openedai-speech), or TTS_MODEL=model@URL "
    "for its own server, or TTS_MODEL=off"
)


async def check(host: Host) -> list[CheckResult]:
    # The endpoint defaults to the LLM's (LLM_BASE_URL, LLM_API_KEY): the model's slice.
    model = host.deps.settings_for(ModelSettings)
    key = model.llm_api_key.get_secret_value() if model.llm_api_key else None
    voice = host.deps.settings_for(VoiceSettings)
    synth = synthesizer(voice, model.llm_base_url, key, host.deps.http)
    if synth is None:
        return [CheckResult("voice replies", True, "off (TTS_MODEL=off): answers are text")]
    probed = await synth.probe()
    return [probe_line("voice replies", "text-to-speech", probed, synth.endpoint, HINT)]
