"""A streamed chat completion: one POST on the endpoint's pooled httpx client, its
server-sent events framed by httpx-sse (comments such as llama.cpp's and OpenRouter's
keep-alives, multi-line data, CR/LF), each parsed as JSON. Failures surface as
bot/llm/wire.py's error types, so retries, the fallback model and the user's error text
work the same for streamed and plain calls.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncGenerator
from typing import Any

import httpx
import orjson
from httpx_sse import EventSource, SSEError

from bot.llm.wire import Endpoint, StreamDataError, StreamErrorEvent, transport_errors

log = logging.getLogger(__name__)


async def open_stream(endpoint: Endpoint, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any]]:
    """POST `body` (stream=True) and, once the status is known to be good, the stream's
    JSON events as dicts. A 4xx/5xx raises its status error before any event."""
    response = await endpoint.send("POST", "/chat/completions", body)
    return _events(endpoint, response)


async def _events(endpoint: Endpoint, response: httpx.Response) -> AsyncGenerator[dict[str, Any]]:
    """The events until `[DONE]`; the body is read to its end so the connection goes back
    to the pool."""
    done = False
    try:
        with transport_errors():
            async for sse in EventSource(response).aiter_sse():
                if done or not sse.data:
                    continue
                if sse.data.startswith("[DONE]"):
                    done = True
                    continue
                yield _parse(endpoint, sse.data)
    except SSEError:
        raise StreamDataError("the model provider did not answer with a stream") from None
    finally:
        await response.aclose()


def _parse(endpoint: Endpoint, payload: str) -> dict[str, Any]:
    try:
        event = orjson.loads(payload)
    except ValueError:  # orjson.JSONDecodeError is one
        raise StreamDataError("the model provider sent a malformed stream") from None
    if not isinstance(event, dict):
        return {}
    # OpenAI, OpenRouter and most others send {"error": {...}}; vLLM {"object": "error", ...}.
    error = event.get("error") or (event if event.get("object") == "error" else None)
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        log.warning(
            "the model provider reported an error in its stream: %s", endpoint.mask(message)
        )
        raise StreamErrorEvent(message, body=error)
    return event
