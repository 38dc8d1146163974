"""What a person sent (voice, photos, documents) as one user message for the model. Files go
to disk, never whole into memory (a document stays in the input folder, ./input/<name> for
the code tool); one item's failure is one sentence, the rest of the message goes on."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bot.media import extract, images, isolated
from bot.media.errors import MediaError
from bot.media.settings import TELEGRAM_DOWNLOAD_LIMIT_MB
from bot.media.transcribe import VOICE_OFF, Transcriber
from tools.code.files import INPUT_DIR, InputStore
from tools.effects import outside_note
from tools.state import Key

AUDIO_KINDS = ("voice", "audio", "video_note")
EXCERPT_CHARS = 2000  # of a long document, shown inline
# Limits of what is downloaded and read; fixed (they were MEDIA_*/IMAGE_*/DOCUMENT_*
# variables no operator needed to change).
MEDIA_MAX_MB = TELEGRAM_DOWNLOAD_LIMIT_MB  # the Bot API's getFile serves no more
# One download, or reading one document: a 20 MB file on a slow line.
MEDIA_TIMEOUT_S = 60.0
# Telegram photos are at most 2560 px and pass as they are; bigger images (sent as files)
# are downscaled. Providers scale further on their side.
IMAGE_MAX_SIDE = 2560
# Document text given whole to the model up to this size (about 2k tokens); a longer one
# goes in as its first part and whole to the code tool.
DOCUMENT_INLINE_CHARS = 8000
DOCUMENT_MAX_PAGES = 300  # PDF pages read: a long report, not a scanned archive
NO_VISION = (
    "This model cannot see images, so I only read the caption. To send photos, use a vision model."
)


HIDDEN = "not shown to the model]"


@dataclass
class MediaItem:
    kind: str  # voice | audio | video_note | photo | document
    file_id: str
    size: int | None  # as Telegram declares it
    name: str
    mime: str | None = None
    caption: str = ""


@dataclass
class Prepared:
    text: str  # the user's message as stored and as the model reads it
    kind: str
    parts: list[dict[str, Any]] = field(default_factory=list)  # images, this request only
    transcripts: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)  # sentences for the user
    useful: bool = False  # something for the model: a caption or a file that worked


Fetch = Callable[[MediaItem, Path, int], Awaitable[None]]  # item, destination, max bytes


class MediaService:
    def __init__(
        self, transcriber: Transcriber, inputs: InputStore, vision_enabled: Callable[[], bool]
    ) -> None:
        self.transcriber = transcriber
        self.inputs = inputs
        self.vision_enabled = vision_enabled
        self.max_bytes = int(MEDIA_MAX_MB * 1024 * 1024)
        self._work = asyncio.Semaphore(2)  # CPU-bound decoding/extraction at once

    def too_big(self, item: MediaItem) -> str | None:
        """The sentence for a file over the download limit, judged before any download."""
        if item.size is None or item.size <= self.max_bytes:
            return None
        return (
            f"{item.name} is {item.size / 2**20:.1f} MB, over the "
            f"{MEDIA_MAX_MB:g} MB that I can download from Telegram; "
            "please send a smaller file."
        )

    async def prepare(self, items: list[MediaItem], user_key: str, fetch: Fetch) -> Prepared:
        captions = list(dict.fromkeys(i.caption.strip() for i in items if i.caption.strip()))
        kinds = {i.kind for i in items}
        out = Prepared(text="", kind=items[0].kind if len(kinds) == 1 else "album")
        out.useful = bool(captions)
        pieces: list[str] = []
        for item in items:
            try:
                piece = await self._one(item, user_key, fetch, out)
            except MediaError as exc:
                out.notices.append(str(exc))
                continue
            pieces.append(piece)
            out.useful = out.useful or not piece.endswith(HIDDEN)
        out.text = "\n\n".join([*captions, *pieces])
        return out

    async def _one(self, item: MediaItem, key: str, fetch: Fetch, out: Prepared) -> str:
        """The item's part of the message text (raises MediaError when it is unusable)."""
        if (problem := self.too_big(item)) is not None:
            raise MediaError(problem)
        mime = item.mime or ""
        is_image = item.kind == "photo" or (
            item.kind == "document"
            and (
                (mime.startswith("image/") and "svg" not in mime)
                or item.name.lower().endswith(images.IMAGE_EXTENSIONS)
            )
        )
        if is_image and not self.vision_enabled():
            if NO_VISION not in out.notices:
                out.notices.append(NO_VISION)
            return f"[{item.kind}: {item.name}, file_id={item.file_id}; {HIDDEN}"
        if item.kind in AUDIO_KINDS and not self.transcriber.enabled:
            raise MediaError(VOICE_OFF)  # before the download: nothing would use it
        path = self.inputs.scratch(key)
        try:
            await self._fetch(fetch, item, path)
            if item.kind in AUDIO_KINDS:
                text = await self._transcribe(item, path)
                out.transcripts.append(text)
                return text
            if is_image:
                async with self._work:
                    data = await asyncio.to_thread(path.read_bytes)
                    uri, _ = await asyncio.to_thread(images.prepare, data, IMAGE_MAX_SIDE)
                out.parts.append({"type": "image_url", "image_url": {"url": uri}})
                # History keeps this placeholder; the image itself goes to this request only.
                # An image is outside content (a screenshot can carry instructions): marked,
                # so later turns, which no longer see it, still know the model read it.
                head = outside_note(f"the image {item.name}")
                return f"{head}[{item.kind}: {item.name}, file_id={item.file_id}]"
            return await self._document(item, key, path)
        finally:
            with contextlib.suppress(OSError):
                path.unlink()

    async def _fetch(self, fetch: Fetch, item: MediaItem, path: Path) -> None:
        try:
            async with asyncio.timeout(MEDIA_TIMEOUT_S):
                await fetch(item, path, self.max_bytes)
        except TimeoutError:
            raise MediaError(
                f"Downloading {item.name} from Telegram took too long; please try again."
            ) from None

    async def _transcribe(self, item: MediaItem, path: Path) -> str:
        data = await asyncio.to_thread(path.read_bytes)
        text = await self.transcriber.transcribe(data, item.name, item.mime or "audio/ogg")
        if not text:
            raise MediaError("I could not make out any words in that recording.")
        return text

    async def _document(self, item: MediaItem, key: str, path: Path) -> str:
        size = (await asyncio.to_thread(path.stat)).st_size
        async with self._work:
            got = await isolated.extract_file(
                path, item.name, item.mime, DOCUMENT_MAX_PAGES, MEDIA_TIMEOUT_S
            )
        if got.kind in ("pdf", "docx") and not got.text.strip():
            return (
                f"[Attachment: {item.name} ({_describe(got, size)}): no text in it "
                "(a scanned document holds only images), so it could not be read]"
            )
        # The code tool gets the original for text and binary files, the text for PDF/DOCX.
        if got.kind in ("pdf", "docx"):
            saved = await asyncio.to_thread(
                self.inputs.write, key, f"{item.name}.txt", got.text.encode("utf-8")
            )
        else:
            saved = await asyncio.to_thread(self.inputs.add, key, item.name, path)
        where = f"./{INPUT_DIR}/{saved}"
        # A document's text is not the user's words: marked, so the turn (and any later one
        # that still reads it) asks before writing, and memory keeps it as the file's.
        head = outside_note(f"the file {item.name}")
        head += f"[Attachment: {item.name} ({_describe(got, size)})"
        if got.kind == "binary":
            return f"{head}: no text extracted; the file is at {where} for the code tool]"
        if len(got.text) <= DOCUMENT_INLINE_CHARS and not got.truncated:
            return f"{head}; also at {where} for the code tool]\n{got.text}\n[end of {item.name}]"
        excerpt = got.text[: min(EXCERPT_CHARS, DOCUMENT_INLINE_CHARS)]
        return (
            f"{head}; long: the first {len(excerpt)} of {len(got.text)} characters follow. "
            f"The full text is at {where}: read it with the code tool]\n{excerpt}\n"
            f"[… {item.name} continues in {where}]"
        )


def _describe(got: extract.Extracted, size: int) -> str:
    bits = [got.kind.upper() if got.kind in ("pdf", "docx") else got.kind]
    if got.pages is not None:
        bits.append(f"{got.pages} pages")
        if got.pages_read is not None and got.pages_read < got.pages:
            bits.append(f"first {got.pages_read} read")
    bits.append(f"{size / 1024:.0f} KB")
    return ", ".join(bits)


MEDIA: Key[MediaService] = Key("media.service")
