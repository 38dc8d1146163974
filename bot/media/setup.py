"""Wiring for media handling: the transcriber, the input store and the vision gate."""

from __future__ import annotations

from bot.llm.vision import VISION, VisionGate, VisionState
from bot.media.attachments import NO_VISION, MediaService
from bot.media.settings import VISION_FILE, VISION_MODE, MediaSettings
from bot.media.transcribe import transcriber
from tools.chat import ChatModel
from tools.code.files import InputStore
from tools.feature import Host


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
