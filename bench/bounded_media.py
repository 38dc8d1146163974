"""Bounded answers from the audio endpoints: the process's peak RSS while a speech endpoint
answers a junk body, and the time a 2-hour silent FLAC takes to be handled.

1. junk: the fake endpoint streams --mb megabytes of junk as the answer to /audio/speech;
   peak RSS (ru_maxrss) grows by how much, and how much the endpoint got to send.
2. flac: the endpoint answers 2 hours of silence as FLAC (~1.3 MB); the time until
   synthesize() returns or refuses.

Usage: python bench/bounded_media.py [--mb 200]
"""

from __future__ import annotations

import asyncio
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import httpx

from bench.cli import options
from bot.voice.speech import SpeechError, Synthesizer
from tests.e2e.test_voice_e2e import silent_flac
from tests.fakes.openai_server import FakeOpenAI


def peak_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


async def main(mb: int) -> None:
    server = await FakeOpenAI().start()
    async with httpx.AsyncClient() as http:
        synth = Synthesizer(http, server.base_url, None, "tts-1", "alloy", 120.0)
        server.speech_audio, server.speech_type = silent_flac(2 * 3600), "audio/flac"
        t0 = time.perf_counter()
        try:
            out = await synth.synthesize("hello")
            flac = f"sent {len(out):,} bytes of OGG/Opus"
        except SpeechError as exc:
            flac = f"refused: {exc}"
        print(
            f"2-hour silent FLAC ({len(server.speech_audio):,} bytes): "
            f"{time.perf_counter() - t0:.1f} s, {flac}"
        )
        server.junk_bytes = mb * 1024 * 1024
        before = peak_mb()
        try:
            await synth.synthesize("hello")
            junk = "accepted"
        except SpeechError as exc:
            junk = f"refused: {exc}"
        print(
            f"{mb} MB junk body: peak RSS {before:.0f} -> {peak_mb():.0f} MB "
            f"(+{peak_mb() - before:.0f} MB), endpoint sent {server.junk_sent / 2**20:.0f} MB, "
            f"{junk}"
        )
    await server.stop()


if __name__ == "__main__":
    asyncio.run(main(options(__doc__, mb=200).mb))
