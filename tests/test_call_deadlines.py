"""One total deadline per call: a speech-to-text service that answers with a slow drip
of bytes (each read well within the per-read timeout) is cut at the transcription deadline, and
the user hears it in one line."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator

import httpx
import pytest
from aiohttp import web

from bot.media.errors import MediaError
from bot.media.transcribe import Transcriber


@pytest.fixture
async def dripping() -> AsyncIterator[str]:
    async def transcriptions(request: web.Request) -> web.StreamResponse:
        await request.read()
        resp = web.StreamResponse(headers={"Content-Type": "application/json"})
        await resp.prepare(request)
        for _ in range(600):  # a minute of keep-alive bytes, each well within a read timeout
            await resp.write(b" ")
            await asyncio.sleep(0.1)
        await resp.write(b'{"text": "too late"}')
        return resp

    app = web.Application()
    app.router.add_post("/v1/audio/transcriptions", transcriptions)
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    try:
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        await runner.cleanup()


async def test_a_dripping_transcription_service_is_cut_at_the_total_deadline(
    dripping: str,
) -> None:
    async with httpx.AsyncClient() as http:
        stt = Transcriber(http, dripping, None, "whisper-1", timeout_s=1.0)
        started = time.monotonic()
        with pytest.raises(MediaError) as err:
            async with asyncio.timeout(30):  # generous under load; the drip lasts a minute
                await stt.transcribe(b"OggS", "voice.ogg", "audio/ogg")
    assert time.monotonic() - started < 30
    assert "took too long" in str(err.value) and "\n" not in str(err.value)
