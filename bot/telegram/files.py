"""Files through the Bot API: downloads bounded in size (getFile + the file URL), and the
files an answer brings (code's ./output/) as photos or documents for the outbox."""

from __future__ import annotations

import asyncio
import logging
import shutil
from pathlib import Path

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError, TelegramBadRequest

from bot.media.attachments import MediaItem
from bot.media.errors import MediaError
from bot.telegram.render import Item, with_retry

log = logging.getLogger(__name__)

PHOTO_EXTENSIONS = (".png", ".jpg", ".jpeg", ".webp", ".gif")
MAX_PHOTO_BYTES = 10 * 1024 * 1024  # sendPhoto's limit
MAX_DOCUMENT_BYTES = 50 * 1024 * 1024  # sendDocument's limit
CHUNK = 64 * 1024


async def download(bot: Bot, item: MediaItem, dest: Path, max_bytes: int) -> None:
    """getFile, then stream the file to `dest`, stopping past `max_bytes`."""
    try:
        info = await with_retry(lambda: bot.get_file(item.file_id), "getFile")
    except TelegramAPIError as exc:
        if isinstance(exc, TelegramBadRequest) and "too big" in str(exc).lower():
            raise MediaError(
                f"{item.name} is over the 20 MB that bots may download from Telegram; "
                "please send a smaller file."
            ) from None
        log.warning("getFile failed: %s", exc)
        raise MediaError(f"Telegram would not give me {item.name}; please send it again.") from None
    if info.file_size is not None and info.file_size > max_bytes:
        raise MediaError(f"{item.name} is too big for me ({info.file_size / 2**20:.1f} MB).")
    if not info.file_path:
        raise MediaError(f"Telegram did not give me a download link for {item.name}.")
    api = bot.session.api
    if api.is_local:  # a local Bot API server hands out paths on this machine
        await asyncio.to_thread(_copy_bounded, Path(info.file_path), dest, max_bytes, item.name)
        return
    url = api.file_url(bot.token, info.file_path)
    size = 0
    try:
        with dest.open("wb") as f:
            async for chunk in bot.session.stream_content(url, chunk_size=CHUNK):
                size += len(chunk)
                if size > max_bytes:
                    raise MediaError(f"{item.name} is bigger than Telegram said; I stopped.")
                f.write(chunk)
    except MediaError:
        raise
    except Exception as exc:  # aiohttp errors, HTTP status: one sentence, details in the log
        log.warning("downloading %s failed: %s", item.kind, type(exc).__name__)
        raise MediaError(
            f"Downloading {item.name} from Telegram failed; please try again."
        ) from None


def _copy_bounded(src: Path, dest: Path, max_bytes: int, name: str) -> None:
    if src.stat().st_size > max_bytes:
        raise MediaError(f"{name} is too big for me.")
    shutil.copyfile(src, dest)


def file_items(files: list[tuple[str, bytes]]) -> list[Item]:
    """An answer's files as messages: images as photos (a photo Telegram refuses goes as a
    document), everything else as a document, one too big for Telegram as a line."""
    items = []
    for name, data in files:
        if len(data) > MAX_DOCUMENT_BYTES:
            items.append(Item("answer", f"{name} is too big to send through Telegram."))
            continue
        photo = name.lower().endswith(PHOTO_EXTENSIONS) and len(data) <= MAX_PHOTO_BYTES
        items.append(Item("photo" if photo else "document", data=data, filename=name))
    return items
