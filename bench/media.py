"""The bot's own cost for media: a 1 MB photo, a 1-minute voice note, 10 big documents.

Runs the real App + aiogram Dispatcher against tests/fakes servers on 127.0.0.1 (Bot API
with getFile and file downloads, a model and a transcription endpoint that answer at once):

1. overhead: photos (2560x1920 JPEG, ~1 MB, as Telegram sends them: passed on as a data URI),
   the same image as a file with IMAGE_MAX_SIDE=2048 (decoded and downscaled), and
   voice notes (240 KB, about a minute of Opus) one at a time; per item, the handler's wall
   time minus the time the fake servers spent in their handlers (Bot API calls, the file
   download, transcription, the model) = the bot's own overhead (p50, p95).
2. memory: 10 chats each send a 10 MB CSV at once; RSS growth (sampled every 5 ms from
   /proc/self/status) over the RSS before, while all ten are downloaded, read and answered.

Usage: python bench/media.py [--items 30]
"""

from __future__ import annotations

import argparse
import asyncio
import io
import logging
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import numpy as np
from PIL import Image
from timing import TimedLLM, TimedTelegram, Timing, polling, rss_mb

from bot.app import build_app
from bot.config import load_settings
from bot.media.attachments import MEDIA
from bot.telegram.dispatcher import build_runtime
from tests.fakes.openai_server import Text
from tests.fakes.telegram_server import message_update
from tests.media_helpers import document, photo, voice


def photo_1mb() -> bytes:
    rng = np.random.default_rng(1)
    x = np.linspace(0, 255, 2560)[None, :, None] + np.zeros((1920, 1, 3))
    x = (x + rng.normal(0, 12, (1920, 2560, 3))).clip(0, 255).astype("uint8")
    out = io.BytesIO()
    Image.fromarray(x).save(out, "JPEG", quality=80)
    return out.getvalue()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def run(items: int) -> None:
    tg = await TimedTelegram().start()
    llm = await TimedLLM(lambda body: Text("ok", chunk=10_000)).start()
    chats = [1000 + i for i in range(10)]
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            data_dir=Path(tmp),
            telegram_bot_token=tg.token,
            telegram_api_url=tg.base_url,
            allowed_user_ids=",".join(map(str, chats)),
            llm_base_url=llm.base_url,
            llm_api_key="sk-bench",
            llm_model="fake-model",
        )
        app = await build_app(settings)
        rt = build_runtime(app)
        timing = Timing()
        rt.dp.update.outer_middleware.register(timing)
        async with polling(rt, tg, poll_s=10):
            jpeg = photo_1mb()
            ogg = b"OggS" + bytes(240 * 1024)
            photo_id, voice_id = tg.add_file(jpeg), tg.add_file(ogg)
            results: dict[str, list[float]] = {"photo": [], "resized": [], "voice": []}
            assert app.has(MEDIA)
            from bot.media import attachments

            default_side = attachments.IMAGE_MAX_SIDE
            msg_id = 0
            for i in range(items + 3):
                for kind in results:
                    msg_id += 1
                    attachments.IMAGE_MAX_SIDE = 2048 if kind == "resized" else default_side
                    fields = (
                        voice(voice_id, len(ogg), duration=60)
                        if kind == "voice"
                        else photo(photo_id, len(jpeg), caption="what is this?")
                    )
                    n_calls, n_files, n_llm = len(tg.calls), len(tg.file_spans), len(llm.spans)
                    sent = len(tg.messages)
                    expect = 2 if kind == "voice" else 1  # the voice quote, then the answer
                    await tg.push(message_update(chats[0], None, message_id=msg_id, extra=fields))
                    await tg.wait_for(lambda s=sent, e=expect: len(tg.messages) >= s + e)
                    await rt.inflight.wait_idle()
                    start, end = timing.spans.pop()
                    fake = sum(c.duration for c in tg.calls[n_calls:] if c.method != "getUpdates")
                    fake += sum(e - s for s, e in tg.file_spans[n_files:])
                    fake += sum(e - s for s, e in llm.spans[n_llm:])
                    if i >= 3:  # warm-up
                        results[kind].append((end - start - fake) * 1000)
                    timing.spans.clear()

            # Phase 2: ten 10 MB documents at once.
            rows = b"".join(b"%d,%d,some text in a column\n" % (i, i * 7) for i in range(400_000))
            big = (b"id,value,label\n" + rows)[: 10 * 1024 * 1024]
            doc_ids = [tg.add_file(big, f"doc{c}") for c in chats]
            await asyncio.sleep(0.2)
            base = rss_mb()
            peak = [base]
            stop = threading.Event()

            def sample() -> None:
                while not stop.is_set():
                    peak[0] = max(peak[0], rss_mb())
                    time.sleep(0.005)

            sampler = threading.Thread(target=sample, daemon=True)
            sampler.start()
            sent = len(tg.messages)
            t0 = time.perf_counter()
            for c, fid in zip(chats, doc_ids, strict=True):
                msg_id += 1
                fields = document(fid, len(big), "data.csv", "text/csv", caption="summarise")
                await tg.push(message_update(c, None, message_id=msg_id, extra=fields))
            await tg.wait_for(lambda: len(tg.messages) >= sent + len(chats), timeout=300)
            await rt.inflight.wait_idle()
            wall = time.perf_counter() - t0
            stop.set()
            sampler.join()
    await tg.stop()
    await llm.stop()

    def line(name: str, values: list[float]) -> str:
        return f"  {name:<40} p50 {statistics.median(values):7.2f}  p95 {pct(values, 0.95):7.2f}"

    print(f"own overhead per item in ms ({items} each, fake endpoints' time excluded)")
    print(line(f"photo {len(jpeg) / 2**20:.2f} MB 2560x1920, passed on", results["photo"]))
    print(line("same, IMAGE_MAX_SIDE=2048 (resized)", results["resized"]))
    print(line(f"voice note 60 s ({len(ogg) // 1024} KB)", results["voice"]))
    print(f"10 concurrent 10 MB documents: handled in {wall:.2f} s")
    print(f"  RSS before {base:.0f} MB, peak {peak[0]:.0f} MB, growth {peak[0] - base:.0f} MB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--items", type=int, default=30)
    args = p.parse_args()
    logging.basicConfig(level=logging.WARNING)
    asyncio.run(run(args.items))


if __name__ == "__main__":
    main()
