"""`sidekick doctor` lines for media: the transcription endpoint and image support."""

from __future__ import annotations

from bot.app import App
from tools.base import CheckResult

HINT = (
    "set TRANSCRIBE_BASE_URL / TRANSCRIBE_API_KEY / TRANSCRIBE_MODEL to a speech-to-text "
    "endpoint (OpenAI, Groq, faster-whisper-server), or TRANSCRIBE_BASE_URL=off"
)


async def check_media(app: App) -> list[CheckResult]:
    if app.media is None:
        return []
    ok, detail = await app.media.transcriber.probe()
    out = [CheckResult("transcription", ok, detail, HINT)]
    mode = app.settings.llm_vision
    if mode == "auto":
        state = {
            None: "not known yet (learned on the first photo)",
            True: "the model reads images",
            False: "the model refused images: they are not sent",
        }[app.media.vision_supported()]
        out.append(CheckResult("vision", True, f"LLM_VISION=auto: {state}"))
    else:
        out.append(CheckResult("vision", True, f"LLM_VISION={mode}"))
    return out
