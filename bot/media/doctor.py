"""`sidekick doctor` lines for media: the transcription endpoint and image support."""

from __future__ import annotations

from bot.llm.settings import ModelSettings
from bot.llm.vision import remembered
from bot.media.settings import VISION_FILE, Endpoint, MediaSettings
from bot.media.transcribe import transcriber
from tools.base import CheckResult
from tools.feature import Host

HINT = (
    "set SPEECH_BASE_URL / SPEECH_API_KEY / TRANSCRIBE_MODEL to a speech-to-text "
    "endpoint (OpenAI, Groq, faster-whisper-server), or TRANSCRIBE_MODEL=model@URL for its "
    "own server, or TRANSCRIBE_MODEL=off"
)


def probe_line(
    name: str, what: str, probed: tuple[bool | None, str], end: Endpoint | None, hint: str
) -> CheckResult:
    """One speech direction's doctor line (voice notes, voice replies)."""
    ok, detail = probed
    if end is not None:  # which endpoint and key, by name: never the key itself
        detail = f"{detail} ({end.said()})"
    if ok is None and end is not None and end.named_by == "LLM_BASE_URL":
        # The LLM's endpoint (OpenRouter, Ollama...) has no speech: a feature it does not
        # offer, not a fault. A SPEECH_BASE_URL set to such an endpoint is one.
        detail = f"not offered: the model endpoint has no {what} ({detail}); to add it, {hint}"
        return CheckResult(name, True, detail)
    return CheckResult(name, bool(ok), detail, hint)


async def check_media(host: Host) -> list[CheckResult]:
    # The endpoint defaults to the LLM's (LLM_BASE_URL, LLM_API_KEY): the model's slice.
    model = host.deps.settings_for(ModelSettings)
    settings = host.deps.settings_for(MediaSettings)
    stt = transcriber(settings, model.llm_base_url, model.llm_api_key, host.deps.http)
    out = [probe_line("transcription", "speech-to-text", await stt.probe(), stt.endpoint, HINT)]
    # What the running bot learned is in DATA_DIR (it remembers a refusal there).
    learned = remembered(host.deps.data_dir / VISION_FILE, model.llm_model)
    state = {
        None: "not known yet (learned on the first photo)",
        True: "the model reads images",
        False: "the model refused images: they are not sent",
    }[learned]
    out.append(CheckResult("vision", True, state))
    return out
