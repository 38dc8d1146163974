"""A lean streamed chat completion on the openai SDK's own HTTP client.

The SDK's request path (options models, header and URL building, its response and stream
wrappers) was the largest share of the bot's own time per message. Here one POST goes out
on the same pooled HTTP client, with the same headers and timeout, and the server-sent
events are split and parsed directly. Failures surface as the SDK's own exception types
(built by the SDK where it has a builder), so retries, the fallback model and the user's
error text work exactly as they do for the SDK's other calls.
"""

from __future__ import annotations

import json
import weakref
from collections.abc import AsyncGenerator
from typing import Any

import httpx2
import openai
import orjson
from openai import AsyncOpenAI
from openai._httpx2 import request_exceptions, timeout_exceptions


class StreamDataError(openai.APIError):
    """The stream carried something that is not a JSON event: a broken provider or proxy."""


class StreamErrorEvent(openai.APIError):
    """The provider reported an error inside the stream, after answering 200."""


class _Endpoint:
    """The chat completions URL and headers of one SDK client, built once."""

    def __init__(self, client: AsyncOpenAI) -> None:
        self.url = str(client.base_url).rstrip("/") + "/chat/completions"
        merged = {**client.default_headers, **client.auth_headers}
        # The SDK's Omit markers (unset organisation, project) are dropped, as it does.
        self.headers = {k: v for k, v in merged.items() if isinstance(v, str)}
        # What the HTTP client's build_request merges on every call (its URL parsing and
        # header merging were three quarters of a request's set-up), done once: the SDK
        # never changes its HTTP client's headers or base URL, nor we the timeout.
        self.timeout = client.timeout
        http = client._client
        self.fast = isinstance(http, httpx2.AsyncClient)  # not a caller's legacy httpx client
        if self.fast:
            self.timeout_ext = httpx2.Timeout(client.timeout).as_dict()
            self.http_url = httpx2.URL(self.url)
            self.http_headers = httpx2.Headers(http.headers)
            self.http_headers.update(self.headers)

    def request(self, http: Any, content: bytes) -> Any:
        """The request http.build_request would make; the client still builds it when it
        holds cookies (a provider that sets them) or query parameters to merge."""
        if not self.fast or http.cookies or http.params:
            return http.build_request(
                "POST",
                self.url,
                content=content,
                headers=self.headers,
                timeout=self.timeout,
            )
        return httpx2.Request(
            "POST",
            self.http_url,
            content=content,
            headers=self.http_headers,
            extensions={"timeout": self.timeout_ext},
        )


# Weak: an endpoint lives as long as its client (tests make many; the bot one or two).
_endpoints: weakref.WeakKeyDictionary[AsyncOpenAI, _Endpoint] = weakref.WeakKeyDictionary()


def _endpoint(client: AsyncOpenAI) -> _Endpoint:
    known = _endpoints.get(client)
    if known is None:
        known = _endpoints[client] = _Endpoint(client)
    return known


async def open_stream(client: AsyncOpenAI, body: dict[str, Any]) -> AsyncGenerator[dict[str, Any]]:
    """POST `body` (stream=True) and, once the status is known to be good, the stream's
    JSON events as dicts. A 4xx/5xx raises the SDK's status error before any event."""
    endpoint = _endpoint(client)
    http = client._client
    request = endpoint.request(http, _encode(body))
    try:
        response = await http.send(request, stream=True)
    except timeout_exceptions() as exc:
        raise openai.APITimeoutError(request=request) from exc
    except request_exceptions() as exc:
        raise openai.APIConnectionError(request=request) from exc
    if response.status_code >= 400:
        try:
            await response.aread()
        except (*timeout_exceptions(), *request_exceptions()):
            pass  # the status alone still says what happened
        finally:
            await response.aclose()
        raise client._make_status_error_from_response(response) from None
    return _events(response, request)


def _encode(body: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; orjson takes a fifth of json's time on a long history."""
    try:
        return orjson.dumps(body)
    except TypeError:  # what orjson refuses (non-string keys, huge ints), json still takes
        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def _events(response: Any, request: Any) -> AsyncGenerator[dict[str, Any]]:
    """Server-sent events (`data:` lines, blank-line separated) as parsed JSON objects,
    until `[DONE]`; the body is read to its end so the connection goes back to the pool."""
    pending = b""
    data: list[bytes] = []
    done = False
    try:
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
                yield _parse(payload, request)
        tail = pending.rstrip(b"\r")
        if not done and tail.startswith(b"data:"):  # a last line without its newline
            data.append(tail[6:] if tail.startswith(b"data: ") else tail[5:])
        if not done and data:  # a last event without its blank line
            payload = b"\n".join(data)
            if not payload.startswith(b"[DONE]"):
                yield _parse(payload, request)
    except timeout_exceptions() as exc:
        raise openai.APITimeoutError(request=request) from exc
    except request_exceptions() as exc:
        raise openai.APIConnectionError(request=request) from exc
    finally:
        await response.aclose()


def _parse(payload: bytes, request: Any) -> dict[str, Any]:
    try:
        event = orjson.loads(payload)
    except ValueError:  # orjson.JSONDecodeError is one
        raise StreamDataError(
            "the model provider sent a malformed stream", request=request, body=None
        ) from None
    if not isinstance(event, dict):
        return {}
    error = event.get("error")
    if error:
        message = error.get("message") if isinstance(error, dict) else None
        if not isinstance(message, str) or not message:
            message = "An error occurred during streaming"
        raise StreamErrorEvent(message, request=request, body=error)
    return event
