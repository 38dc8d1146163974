"""Wiring for media handling: the transcriber, the input store and the vision gate."""

from __future__ import annotations

import httpx

from bot.config import Settings
from bot.llm.model import ChatModel
from bot.llm.vision import VisionGate
from bot.media.attachments import MediaService
from bot.media.transcribe import TIMEOUT_S, Transcriber
from tools.code.files import InputStore


def vision_gate(settings: Settings, llm: ChatModel) -> VisionGate:
    return VisionGate(
        llm, settings.llm_vision, settings.llm_model, settings.data_dir / "vision.json"
    )


def build_media(settings: Settings, http: httpx.AsyncClient, vision: VisionGate) -> MediaService:
    base = settings.transcribe_base_url or settings.llm_base_url
    key = settings.transcribe_api_key or settings.llm_api_key
    transcriber = Transcriber(
        http,
        None if base.strip().lower() == "off" else base,
        key.get_secret_value() if key else None,
        settings.transcribe_model,
        TIMEOUT_S,
    )
    inputs = InputStore(settings.data_dir / "inputs")
    return MediaService(settings, transcriber, inputs, vision.enabled, lambda: vision.supported)
