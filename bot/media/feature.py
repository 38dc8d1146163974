"""Media: voice messages transcribed, photos shown to the model, documents extracted. A model
that refuses images answers without them, and the person reads why under the answer."""

from __future__ import annotations

from bot.media.settings import MediaSettings
from tools.feature import Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.llm.vision import VISION, VisionGate, VisionState
    from bot.media.attachments import MEDIA, NO_VISION, MediaService
    from bot.media.doctor import check_media
    from bot.media.settings import VISION_FILE, VISION_MODE
    from bot.media.transcribe import transcriber
    from tools.chat import ChatModel
    from tools.code.files import InputStore

    async def vision_state(host: Host) -> VisionState:
        deps = host.deps
        model = deps.endpoint.model if deps.endpoint is not None else ""
        return VisionState(VISION_MODE, model, deps.data_dir / VISION_FILE)

    async def vision_gate(host: Host, model: ChatModel) -> ChatModel:
        return VisionGate(model, await host.need(VISION), NO_VISION)

    async def media(host: Host) -> MediaService:
        deps = host.deps
        end = deps.endpoint
        url, key = (end.base_url, end.api_key) if end is not None else ("", None)
        stt = transcriber(deps.settings_for(MediaSettings), url, key, deps.http)
        inputs = InputStore(deps.data_dir / "inputs")
        vision = await host.need(VISION)
        return MediaService(stt, inputs, vision.enabled)

    return Setup(
        parts=(Provide(VISION, vision_state), Provide(MEDIA, media)),
        wraps=(vision_gate,),
        doctor=check_media,
    )


FEATURE = Feature(name="media", settings=MediaSettings, setup=setup)
