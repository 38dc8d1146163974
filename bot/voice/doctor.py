"""`sidekick doctor` line for voice replies: the speech endpoint, probed without speaking."""

from __future__ import annotations

from bot.llm.settings import ModelSettings
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
    ok, detail = await synth.probe()
    if synth.endpoint is not None:  # which endpoint and key, by name: never the key itself
        detail = f"{detail} ({synth.endpoint.said()})"
    if ok is None and synth.endpoint is not None and synth.endpoint.named_by == "LLM_BASE_URL":
        # The LLM's endpoint (OpenRouter, Ollama...) has no speech: a feature it does not
        # offer, not a fault. A SPEECH_BASE_URL set to such an endpoint is one.
        detail = (
            f"not offered: the model endpoint has no text-to-speech ({detail}); to add it, {HINT}"
        )
        return [CheckResult("voice replies", True, detail)]
    return [CheckResult("voice replies", bool(ok), detail, HINT)]
