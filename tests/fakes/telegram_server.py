"""A small Telegram Bot API server on 127.0.0.1 for end-to-end tests and the benchmark.

It serves `/bot<token>/<method>` with JSON, urlencoded or multipart bodies (aiogram sends
multipart), long-polls `getUpdates` for real, and rejects what Telegram rejects: empty text,
text over 4096 UTF-16 units, entities outside the text (measured in UTF-16), links with a bad
URL, drafts to a non-private chat, unknown tokens (401). `fail_next(method, 429, ...)` makes
the next calls fail on demand; `down(502)` ... `up()` is an outage window: every call but
getUpdates fails with that status (users' messages still arrive) until it ends. Every
accepted outgoing message is recorded in order.

Files: `add_file(data)` stores a file the user "sent" and returns its file_id; getFile
answers with its path (or 400 "file is too big" above 20 MB, as Telegram does) and
`/file/bot<token>/<path>` serves it; `downloads` lists the paths fetched. sendPhoto and
sendDocument record the bytes received. `album_updates(...)` builds a media group.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from tests.fakes.telegram_files import FileMethods, album_updates

MAX_TEXT = 4096
RECHECK_S = 0.05  # how often wait_for looks again without a request to wake it
ENTITY_TYPES = {
    "mention", "hashtag", "cashtag", "bot_command", "url", "email", "phone_number", "bold",
    "italic", "underline", "strikethrough", "spoiler", "blockquote", "expandable_blockquote",
    "code", "pre", "text_link", "text_mention", "custom_emoji", "date_time",
}  # fmt: skip
JSON_FIELDS = {
    "entities", "reply_markup", "commands", "allowed_updates", "reply_parameters", "reaction",
    "menu_button",
}  # fmt: skip
SENDS = {"sendMessage", "sendDocument", "sendPhoto", "sendVoice"}


def utf16_len(text: str) -> int:
    return len(text.encode("utf-16-le", "surrogatepass")) // 2


class ApiError(Exception):
    def __init__(self, code: int, description: str, retry_after: int | None = None) -> None:
        super().__init__(description)
        self.code, self.description, self.retry_after = code, description, retry_after

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": False, "error_code": self.code}
        out["description"] = self.description
        if self.retry_after is not None:
            out["parameters"] = {"retry_after": self.retry_after}
        return out


@dataclass
class Sent:
    """One accepted outgoing message (sendMessage / sendDocument)."""

    method: str
    chat_id: int
    message_id: int
    text: str
    entities: list[dict[str, Any]]
    reply_markup: dict[str, Any] | None
    document: bytes | None = None
    filename: str | None = None
    at: float = 0.0


@dataclass
class Call:
    """Every request the bot made, accepted or not."""

    method: str
    params: dict[str, Any]
    status: int
    at: float
    duration: float = 0.0


@dataclass
class FakeTelegram(FileMethods):
    token: str = "123456789:AAE-fake-token-for-tests-000000000000"
    host: str = "127.0.0.1"
    port: int = 0
    bot_id: int = 123456789
    username: str = "sidekick_test_bot"
    messages: list[Sent] = field(default_factory=list)
    drafts: list[Call] = field(default_factory=list)
    actions: list[Call] = field(default_factory=list)
    calls: list[Call] = field(default_factory=list)
    commands: list[dict[str, Any]] = field(default_factory=list)
    menu_button: dict[str, Any] | None = None  # the last setChatMenuButton's
    reactions: list[tuple[int, int, list[str]]] = field(default_factory=list)  # chat, message
    # update_id of the newest update the bot has confirmed (via getUpdates offset)
    confirmed: int = 0
    _updates: list[dict[str, Any]] = field(default_factory=list)
    _next_update: Any = field(default_factory=lambda: itertools.count(1))
    _msg_ids: dict[int, Any] = field(default_factory=dict)
    _failures: dict[str, list[ApiError]] = field(default_factory=dict)
    outage: int | None = None  # the status every call but getUpdates gets (down/up)
    _changed: asyncio.Condition | None = None
    _stopping: bool = False
    _runner: web.AppRunner | None = None
    files: dict[str, bytes] = field(default_factory=dict)  # file_id -> data
    downloads: list[str] = field(default_factory=list)  # file paths fetched
    file_delay: float = 0.0  # seconds before serving a file download

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    async def start(self) -> FakeTelegram:
        self._changed = asyncio.Condition()
        app = web.Application(client_max_size=60 * 1024 * 1024)
        app.router.add_route("*", "/bot{token}/{method}", self._handle)
        app.router.add_get("/file/bot{token}/{path:.+}", self._file)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        return self

    async def stop(self) -> None:
        self._stopping = True
        await self._notify()
        if self._runner is not None:
            await self._runner.cleanup()

    # ---- what tests drive -------------------------------------------------------------

    async def push(self, update: dict[str, Any]) -> int:
        """Queue an update (without update_id) for getUpdates; returns its update_id."""
        update = {"update_id": next(self._next_update), **update}
        self._updates.append(update)
        await self._notify()
        return int(update["update_id"])

    def fail_next(
        self, method: str, code: int = 429, *, times: int = 1, retry_after: int | None = 1
    ) -> None:
        """Make the next `times` calls of `method` fail with `code` (429 carries retry_after)."""
        desc = (
            f"Too Many Requests: retry after {retry_after}"
            if code == 429
            else f"Bad Request: scripted failure {code}"
        )
        err = ApiError(code, desc, retry_after if code == 429 else None)
        self._failures.setdefault(method, []).extend([err] * times)

    def down(self, code: int = 502) -> None:
        """An outage begins: every call but getUpdates fails with `code` until `up()`."""
        self.outage = code

    def up(self) -> None:
        self.outage = None

    def sent_to(self, chat_id: int) -> list[Sent]:
        return [m for m in self.messages if m.chat_id == chat_id]

    async def wait_for(self, predicate: Callable[[], bool], timeout: float = 60.0) -> None:  # noqa: ASYNC109
        """Wait until `predicate()` holds; TimeoutError if not. Re-checked after every request
        and at least every RECHECK_S: a predicate may look at what another server saw (the
        fake model's requests), which wakes nobody here."""
        assert self._changed is not None
        changed = self._changed

        async def wait() -> None:
            async with changed:
                while not predicate():
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), RECHECK_S)

        await asyncio.wait_for(wait(), timeout)

    def all_confirmed(self) -> bool:
        return not self._updates or self.confirmed >= self._updates[-1]["update_id"]

    # ---- the Bot API --------------------------------------------------------------------

    async def _notify(self) -> None:
        if self._changed is not None:
            async with self._changed:
                self._changed.notify_all()

    async def _params(self, request: web.Request) -> tuple[dict[str, Any], dict[str, Any]]:
        files: dict[str, Any] = {}
        if request.content_type == "application/json":
            body = await request.json() if request.can_read_body else {}
            return dict(body or {}), files
        params: dict[str, Any] = {}
        if request.content_type == "multipart/form-data":
            reader = await request.multipart()
            while (part := await reader.next()) is not None:
                if part.filename:  # type: ignore[union-attr]
                    files[part.name] = (part.filename, await part.read())  # type: ignore[union-attr]
                else:
                    params[part.name] = await part.text()  # type: ignore[union-attr]
        else:
            params = dict(await request.post())
        for key in JSON_FIELDS & params.keys():
            if isinstance(params[key], str):
                params[key] = json.loads(params[key])
        return params, files

    async def _handle(self, request: web.Request) -> web.Response:
        started = time.perf_counter()
        method = request.match_info["method"]
        params, files = await self._params(request)
        status = 200
        try:
            if request.match_info["token"] != self.token:
                raise ApiError(401, "Unauthorized")
            if self.outage is not None and method != "getUpdates":
                raise ApiError(self.outage, "Bad Gateway")
            failures = self._failures.get(method)
            if failures:
                raise failures.pop(0)
            handler = getattr(self, f"_m_{method}", None)
            if handler is None:
                raise ApiError(404, "Not Found: method not found")
            result = await handler(params, files)
            body: dict[str, Any] = {"ok": True, "result": result}
        except ApiError as err:
            status, body = err.code, err.body()
        call = Call(method, params, status, time.time(), time.perf_counter() - started)
        self.calls.append(call)
        if method == "sendMessageDraft" and status == 200:
            self.drafts.append(call)
        if method == "sendChatAction" and status == 200:
            self.actions.append(call)
        await self._notify()
        return web.json_response(body, status=status)

    def _message(self, chat_id: int, text: str | None, **extra: Any) -> dict[str, Any]:
        ids = self._msg_ids.setdefault(chat_id, itertools.count(1))
        chat_type = "private" if chat_id > 0 else "supergroup"
        chat: dict[str, Any] = {"id": chat_id, "type": chat_type}
        if chat_id < 0:
            chat["title"] = "Test group"
        sender = {"id": self.bot_id, "is_bot": True, "first_name": "Sidekick"}
        msg = {"message_id": next(ids), "date": int(time.time()), "chat": chat, "from": sender}
        if text is not None:
            msg["text"] = text
        return {**msg, **extra}

    def _check_text(self, text: Any, entities: Any, *, allow_empty: bool = False) -> None:
        text = text or ""
        if not text.strip() and not allow_empty:
            raise ApiError(400, "Bad Request: message text is empty")
        size = utf16_len(text)
        if size > MAX_TEXT:
            raise ApiError(400, "Bad Request: message is too long")
        for ent in entities or []:
            offset, length = ent.get("offset"), ent.get("length")
            if not isinstance(offset, int) or not isinstance(length, int):
                raise ApiError(400, "Bad Request: can't parse entities: bad offset or length")
            if offset < 0 or length <= 0 or offset + length > size:
                raise ApiError(
                    400,
                    f"Bad Request: can't parse entities: entity beyond the end of the text "
                    f"at UTF-16 offset {offset}",
                )
            if ent.get("type") not in ENTITY_TYPES:
                raise ApiError(400, f"Bad Request: can't parse entities: {ent.get('type')!r}")
            if ent["type"] == "text_link":
                url = str(ent.get("url", ""))
                if not url.startswith(("http://", "https://", "tg://", "mailto:")):
                    raise ApiError(400, "Bad Request: can't parse entities: wrong HTTP URL")

    def _chat_id(self, params: dict[str, Any]) -> int:
        try:
            return int(params["chat_id"])
        except (KeyError, ValueError) as exc:
            raise ApiError(400, "Bad Request: chat not found") from exc

    async def _m_getMe(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        return {
            "id": self.bot_id,
            "is_bot": True,
            "first_name": "Sidekick",
            "username": self.username,
            "can_join_groups": True,
            "can_read_all_group_messages": False,
            "supports_inline_queries": False,
        }

    async def _m_getUpdates(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        offset = int(params.get("offset") or 0)
        timeout = float(params.get("timeout") or 0)
        limit = int(params.get("limit") or 100)
        if offset:
            # Telegram forgets every update below the offset: they are confirmed.
            self.confirmed = max(self.confirmed, offset - 1)
            self._updates = [u for u in self._updates if u["update_id"] >= offset]
            await self._notify()  # now, not when this long poll ends
        deadline = time.monotonic() + timeout
        assert self._changed is not None
        async with self._changed:
            while not self._updates and not self._stopping:
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                try:
                    await asyncio.wait_for(self._changed.wait(), left)
                except TimeoutError:
                    break
        return self._updates[:limit]

    async def _m_sendMessage(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        text, entities = params.get("text"), params.get("entities")
        if params.get("parse_mode"):
            raise ApiError(400, "Bad Request: this fake server only accepts entities")
        self._check_text(text, entities)
        msg = self._message(chat_id, text, entities=entities or [])
        if params.get("reply_markup"):
            msg["reply_markup"] = params["reply_markup"]
        self.messages.append(
            Sent(
                "sendMessage",
                chat_id,
                msg["message_id"],
                text or "",
                entities or [],
                params.get("reply_markup"),
                at=time.time(),
            )
        )
        return msg

    async def _m_sendDocument(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        # Telegram takes the file as the `document` part itself, or as
        # `document=attach://<name>` with the file in the part `<name>` (aiogram's way).
        ref = params.get("document")
        key = ref.removeprefix("attach://") if isinstance(ref, str) else "document"
        if key not in files:
            raise ApiError(400, "Bad Request: there is no document in the request")
        filename, data = files[key]
        caption = params.get("caption")
        if caption is not None and utf16_len(caption) > 1024:
            raise ApiError(400, "Bad Request: message caption is too long")
        doc = {"file_id": f"doc{len(self.messages)}", "file_unique_id": "u", "file_name": filename}
        msg = self._message(chat_id, None, document=doc)
        if caption:
            msg["caption"] = caption
        self.messages.append(
            Sent(
                "sendDocument",
                chat_id,
                msg["message_id"],
                caption or "",
                [],
                params.get("reply_markup"),
                document=data,
                filename=filename,
                at=time.time(),
            )
        )
        return msg

    async def _m_sendMessageDraft(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        if chat_id < 0:
            raise ApiError(400, "Bad Request: drafts can be sent only to private chats")
        if not int(params.get("draft_id") or 0):
            raise ApiError(400, "Bad Request: draft_id must be non-zero")
        self._check_text(params.get("text"), params.get("entities"), allow_empty=True)
        return True

    async def _m_editMessageText(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        self._check_text(params.get("text"), params.get("entities"))
        target = self._find(chat_id, int(params.get("message_id") or 0))
        target.text, target.entities = params["text"], params.get("entities") or []
        # As Telegram does: an edit without a keyboard takes the message's keyboard away.
        target.reply_markup = params.get("reply_markup")
        return self._message(chat_id, target.text) | {"message_id": target.message_id}

    async def _m_editMessageReplyMarkup(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        target = self._find(chat_id, int(params.get("message_id") or 0))
        target.reply_markup = params.get("reply_markup")
        return self._message(chat_id, target.text) | {"message_id": target.message_id}

    async def _m_deleteMessage(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id = self._chat_id(params)
        target = self._find(chat_id, int(params.get("message_id") or 0))
        self.messages.remove(target)
        return True

    def _find(self, chat_id: int, message_id: int) -> Sent:
        for m in self.messages:
            if m.chat_id == chat_id and m.message_id == message_id:
                return m
        raise ApiError(400, "Bad Request: message to edit not found")

    async def _m_sendChatAction(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        self._chat_id(params)
        return True

    async def _m_setMessageReaction(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        chat_id, message_id = self._chat_id(params), int(params["message_id"])
        emoji = [r["emoji"] for r in params.get("reaction") or []]
        self.reactions.append((chat_id, message_id, emoji))
        return True

    async def _m_setMyCommands(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        self.commands = list(params.get("commands") or [])
        return True

    async def _m_setChatMenuButton(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        self.menu_button = params.get("menu_button")
        return True

    async def _m_answerCallbackQuery(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        return True

    async def _m_deleteWebhook(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        return True

    async def _m_setWebhook(self, params: dict[str, Any], files: dict[str, Any]) -> Any:
        return True


def message_update(
    user_id: int, text: str | None, *, chat_id: int | None = None, message_id: int = 1,
    first_name: str = "Tester", extra: dict[str, Any] | None = None,
) -> dict[str, Any]:  # fmt: skip
    """A `message` update from `user_id` (private chat unless `chat_id` is negative)."""
    chat_id = user_id if chat_id is None else chat_id
    chat: dict[str, Any] = {"id": chat_id, "type": "private" if chat_id > 0 else "supergroup"}
    if chat_id > 0:
        chat["first_name"] = first_name
    else:
        chat["title"] = "Test group"
    msg: dict[str, Any] = {
        "message_id": message_id,
        "date": int(time.time()),
        "chat": chat,
        "from": {"id": user_id, "is_bot": False, "first_name": first_name},
    }
    if text is not None:
        msg["text"] = text
        if text.startswith("/"):
            cmd = text.split()[0]
            msg["entities"] = [{"type": "bot_command", "offset": 0, "length": len(cmd)}]
    return {"message": {**msg, **(extra or {})}}


def callback_update(
    user_id: int, data: str, message: dict[str, Any], *, query_id: str = "1"
) -> dict[str, Any]:
    return {
        "callback_query": {
            "id": query_id,
            "from": {"id": user_id, "is_bot": False, "first_name": "Tester"},
            "chat_instance": "ci",
            "message": message,
            "data": data,
        }
    }


__all__ = [
    "ApiError", "Call", "FakeTelegram", "Sent", "album_updates", "callback_update",
    "message_update", "utf16_len",
]  # fmt: skip
