"""A lean streamed chat completion: one POST on the endpoint's pooled httpx client, and
the server-sent events split and parsed directly (the openai SDK's request and stream
wrappers were once the largest share of the bot's own time per message). Failures surface
as bot/llm/wire.py's error types, so retries, the fallback model and the user's error text
work the same for streamed and plain calls.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator
from typing import Any

import httpx
import orjson

from bot.llm.wire import (
    Endpoint,
    StreamDataError,
    StreamErrorEvent,
    encode,
    transport_errors,
)


async def open_stream(endpoint: Endpoint, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any]]:
    """POST `body` (stream=True) and, once the status is known to be good, the stream's
    JSON events as dicts. A 4xx/5xx raises its status error before any event."""
    request = endpoint.request("POST", "/chat/completions", encode(body))
    response = await endpoint.send(request, stream=True)
    return _events(response)


async def _events(response: httpx.Response) -> AsyncGenerator[dict[str, Any]]:
    """Server-sent events (`data:` lines, blank-line separated) as parsed JSON objects,
    until `[DONE]`; the body is read to its end so the connection goes back to the pool."""
    pending = b""
    data: list[bytes] = []
    done = False
    try:
        with transport_errors():
            async for piece in response.aiter_bytes():
                if done:
                    continue
                pending += piece
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    line = raw[:-1] if raw.endswith(b"\r") else raw
                    if line:
                        if line.startswith(b"data:"):
                            value = line[5:]
                            data.append(value[1:] if value.startswith(b" ") else value)
                        continue  # event:, id:, retry: and :comments carry nothing we use
                    if not data:
                        continue
                    payload = b"\n".join(data)
                    data = []
                    if payload.startswith(b"[DONE]"):
                        done = True
                        break
                    yield _parse(payload)
        tail = pending.rstrip(b"\r")
        if not done and tail.startswith(b"data:"):  # a last line without its newline
            data.append(tail[6:] if tail.startswith(b"data: ") else tail[5:])
        if not done and data:  # a last event without its blank line
            payload = b"\n".join(data)
            if not payload.startswith(b"[DONE]"):
                yield _parse(payload)
    finally:
        await response.aclose()


def _parse(payload: bytes) -> dict[str, Any]:
    try:
        event = orjson.loads(payload)
    except ValueError:  # orjson.JSONDecodeError is one
        raise StreamDataError("the model provider sent a malformed stream") from None
    if not isinstance(event, dict):
        return {}
    error = event.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise StreamErrorEvent(message, body=error)
    return event
