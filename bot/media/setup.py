"""Wiring for media handling: the transcriber, the input store and the vision gate."""

from __future__ import annotations

import httpx

from bot.config import Settings
from bot.llm.vision import VisionGate
from bot.media.attachments import MediaService
from bot.media.settings import VISION_FILE, VISION_MODE
from bot.media.transcribe import transcriber
from tools.chat import ChatModel
from tools.code.files import InputStore


def vision_gate(settings: Settings, llm: ChatModel) -> VisionGate:
    return VisionGate(llm, VISION_MODE, settings.llm_model, settings.data_dir / VISION_FILE)


def build_media(settings: Settings, http: httpx.AsyncClient, vision: VisionGate) -> MediaService:
    stt = transcriber(settings, settings.llm_base_url, settings.llm_api_key, http)
    inputs = InputStore(settings.data_dir / "inputs")
    return MediaService(settings, stt, inputs, vision.enabled, lambda: vision.supported)
