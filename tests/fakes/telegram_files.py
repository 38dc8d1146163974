"""The file half of the fake Bot API: getFile, file downloads, sendPhoto, sendVoice, albums.

Mixed into FakeTelegram (tests/fakes/telegram_server.py), whose dataclass holds the state
these methods use: `files` (file_id -> bytes), `downloads`, `file_delay`, `messages`.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from tests.fakes.telegram_server import Call, Sent

# telegram_server imports this module: its names are imported where they are used.

GETFILE_LIMIT = 20 * 1024 * 1024
MAX_PHOTO = 10 * 1024 * 1024


class FileMethods:
    token: str
    files: dict[str, bytes]
    downloads: list[str]
    file_delay: float
    messages: list[Sent]
    calls: list[Call]
    # and FakeTelegram's _chat_id(params) and _message(chat_id, text, **extra)

    def add_file(self, data: bytes, file_id: str | None = None) -> str:
        """Store a file a user sends; returns its file_id (use it in the update)."""
        file_id = file_id or f"file{len(self.files) + 1}"
        self.files[file_id] = data
        return file_id

    def getfile_calls(self) -> list[Call]:
        return [c for c in self.calls if c.method == "getFile"]

    async def _file(self, request: web.Request) -> web.StreamResponse:
        if request.match_info["token"] != self.token:
            return web.json_response({"ok": False, "error_code": 401}, status=401)
        path = request.match_info["path"]
        file_id = path.removeprefix("documents/")
        if file_id not in self.files:
            return web.json_response({"ok": False, "error_code": 404}, status=404)
        self.downloads.append(path)
        if self.file_delay:
            await asyncio.sleep(self.file_delay)
        return web.Response(body=self.files[file_id], content_type="application/octet-stream")

    async def _m_sendPhoto(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        from tests.fakes.telegram_server import ApiError, Sent

        chat_id = self._chat_id(params)
        ref = params.get("photo")
        key = ref.removeprefix("attach://") if isinstance(ref, str) else "photo"
        if key not in files:
            raise ApiError(400, "Bad Request: there is no photo in the request")
        filename, data = files[key]
        if len(data) > MAX_PHOTO:
            raise ApiError(400, "Bad Request: PHOTO_SAVE_FILE_INVALID")
        photo = [{"file_id": f"photo{len(self.messages)}", "file_unique_id": "u", "width": 1,
                  "height": 1, "file_size": len(data)}]  # fmt: skip
        msg = self._message(chat_id, None, photo=photo)
        self.messages.append(
            Sent("sendPhoto", chat_id, msg["message_id"], params.get("caption") or "", [],
                 params.get("reply_markup"), document=data, filename=filename, at=time.time())
        )  # fmt: skip
        return msg

    async def _m_sendVoice(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        from tests.fakes.telegram_server import ApiError, Sent

        chat_id = self._chat_id(params)
        ref = params.get("voice")
        key = ref.removeprefix("attach://") if isinstance(ref, str) else "voice"
        if key not in files:
            raise ApiError(400, "Bad Request: there is no voice in the request")
        filename, data = files[key]
        caption = params.get("caption")
        if caption is not None and len(caption) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        voice = {"file_id": f"voice{len(self.messages)}", "file_unique_id": "u", "duration": 1,
                 "mime_type": "audio/ogg", "file_size": len(data)}  # fmt: skip
        msg = self._message(chat_id, None, voice=voice)
        self.messages.append(
            Sent("sendVoice", chat_id, msg["message_id"], caption or "", [],
                 params.get("reply_markup"), document=data, filename=filename, at=time.time())
        )  # fmt: skip
        return msg

    async def _m_getFile(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        from tests.fakes.telegram_server import ApiError

        file_id = str(params.get("file_id") or "")
        if file_id not in self.files:
            raise ApiError(400, "Bad Request: invalid file_id")
        size = len(self.files[file_id])
        if size > GETFILE_LIMIT:
            raise ApiError(400, "Bad Request: file is too big")
        return {"file_id": file_id, "file_unique_id": f"u{file_id}", "file_size": size,
                "file_path": f"documents/{file_id}"}  # fmt: skip


def album_updates(
    user_id: int,
    parts: list[dict[str, Any]],
    *,
    group_id: str = "album1",
    first_message_id: int = 1,
) -> list[dict[str, Any]]:
    """The updates of one album: each part is the message's media fields (photo=..., caption)."""
    from tests.fakes.telegram_server import message_update

    return [
        message_update(
            user_id, None, message_id=first_message_id + i,
            extra={"media_group_id": group_id, **part},
        )
        for i, part in enumerate(parts)
    ]  # fmt: skip
