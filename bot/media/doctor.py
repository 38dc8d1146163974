"""`sidekick doctor` lines for media: the transcription endpoint and image support."""

from __future__ import annotations

from bot.llm.settings import ModelSettings
from bot.llm.vision import remembered
from bot.media.settings import VISION_FILE, MediaSettings
from bot.media.transcribe import transcriber
from tools.base import CheckResult
from tools.feature import Host

HINT = (
    "set SPEECH_BASE_URL / SPEECH_API_KEY / TRANSCRIBE_MODEL to a speech-to-text "
    "endpoint (OpenAI, Groq, faster-whisper-server), or TRANSCRIBE_MODEL=model@URL for its "
    "own server, or TRANSCRIBE_MODEL=off"
)


async def check_media(host: Host) -> list[CheckResult]:
    # The endpoint defaults to the LLM's (LLM_BASE_URL, LLM_API_KEY): the model's slice.
    model = host.deps.settings_for(ModelSettings)
    settings = host.deps.settings_for(MediaSettings)
    stt = transcriber(settings, model.llm_base_url, model.llm_api_key, host.deps.http)
    ok, detail = await stt.probe()
    if stt.endpoint is not None:  # which endpoint and key, by name: never the key itself
        detail = f"{detail} ({stt.endpoint.said()})"
    if ok is None and stt.endpoint is not None and stt.endpoint.named_by == "LLM_BASE_URL":
        # As for voice replies: the LLM's endpoint not offering it is no fault.
        detail = (
            f"not offered: the model endpoint has no speech-to-text ({detail}); to add it, {HINT}"
        )
        out = [CheckResult("transcription", True, detail)]
    else:
        out = [CheckResult("transcription", bool(ok), detail, HINT)]
    # What the running bot learned is in DATA_DIR (it remembers a refusal there).
    learned = remembered(host.deps.data_dir / VISION_FILE, model.llm_model)
    state = {
        None: "not known yet (learned on the first photo)",
        True: "the model reads images",
        False: "the model refused images: they are not sent",
    }[learned]
    out.append(CheckResult("vision", True, state))
    return out
