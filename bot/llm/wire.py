"""The OpenAI-compatible endpoint over httpx: one pooled client per endpoint, its JSON
requests and streamed answers, and the errors.

The openai SDK used to sit here. The bot posts wire-format dicts and parses the answers
itself, so all it took from the SDK was a configured HTTP client, its request headers and
its error types, at a large import cost. The requests keep the SDK's timeout, pool sizes
and the organisation/project headers; the User-Agent names Sidekick.

A streamed answer's server-sent events are framed by httpx-sse (comments such as
llama.cpp's and OpenRouter's keep-alives, multi-line data, CR/LF), each parsed as JSON; its
failures surface as the same error types, so retries, the fallback model and the user's
error text work the same for streamed and plain calls.
"""

from __future__ import annotations

import logging
import os
from collections.abc import AsyncGenerator, Callable, Iterable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import httpx
import orjson
from httpx_sse import EventSource, SSEError

from bot.logs import Scrubber
from tools.tls import tls_context

log = logging.getLogger(__name__)
T = TypeVar("T")


class APIError(Exception):
    """Any failure talking to the model endpoint; `kind` is what failed, in the words the
    log and the user's outage line use (never the provider's own)."""

    kind = "failed"

    def __init__(self, message: str, *, body: object = None) -> None:
        super().__init__(message)
        self.message = message
        self.body = body


class APIStatusError(APIError):
    """A 4xx/5xx answer. `body` is the error object (or text) the provider sent; its words
    are for the log, never for the model or the user."""

    def __init__(
        self,
        message: str,
        *,
        status_code: int,
        headers: httpx.Headers,
        body: object,
        error_message: object = None,
    ) -> None:
        super().__init__(message, body=body)
        self.status_code = status_code
        self.headers = headers
        self.error_message = error_message  # {"error": {"message": ...}} when sent so
        self.kind = f"HTTP {status_code}"


class APIConnectionError(APIError):
    kind = "connection failed"

    def __init__(self, message: str = "Connection error.") -> None:
        super().__init__(message)


class APITimeoutError(APIConnectionError):
    """A subclass, as in the SDK: a timeout is a connection that did not answer in time."""

    kind = "timed out"

    def __init__(self) -> None:
        super().__init__("Request timed out.")


class Stalled(APITimeoutError):
    """A try that brought nothing new (no event of its stream, or no answer) for too long."""

    kind = "stalled"

    def __init__(self, seconds: float) -> None:
        APIConnectionError.__init__(self, f"Nothing from the model for {seconds:g} s.")


class ResponseDataError(APIError):
    """A 200 whose body is not what the OpenAI API sends: a broken provider or proxy."""

    kind = "malformed answer"


class StreamDataError(ResponseDataError):
    """The stream carried something that is not a JSON event."""

    kind = "malformed stream"


class StreamErrorEvent(APIError):
    """The provider reported an error inside the stream, after answering 200."""

    kind = "error in the stream"  # the provider's own words go to no user


def status_error(status: int, headers: httpx.Headers, raw: bytes) -> APIStatusError:
    """The error for a 4xx/5xx answer, its message built as the SDK built it (the checks
    for refused fields read it)."""
    text = raw.decode("utf-8", "replace").strip()
    try:
        body: object = orjson.loads(text)
    except ValueError:
        body = text
    error = body.get("error", body) if isinstance(body, dict) else body
    said = error.get("message") if isinstance(error, dict) else None
    said = said if isinstance(said, str) and said else None
    message = f"Error code: {status}" + (f" - {said}" if said else "")
    return APIStatusError(
        message, status_code=status, headers=headers, body=error, error_message=said
    )


def _user_agent() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        ours = f"Sidekick/{version('sidekick')}"
    except PackageNotFoundError:  # run from a source tree that was never installed
        ours = "Sidekick"
    return f"{ours} python-httpx/{version('httpx')}"


def request_headers(api_key: str) -> dict[str, str]:
    headers = {
        "Accept": "application/json",
        "Content-Type": "application/json",
        "User-Agent": _user_agent(),
    }
    # The openai SDK read these two from the environment; a host that sets them keeps them.
    from_env = (("OpenAI-Organization", "OPENAI_ORG_ID"), ("OpenAI-Project", "OPENAI_PROJECT_ID"))
    for header, var in from_env:
        if value := os.environ.get(var):
            headers[header] = value
    headers["Authorization"] = f"Bearer {api_key}"
    return headers


class Endpoint:
    """One OpenAI-compatible base URL with its key: a pooled httpx client (or the caller's)
    and the request headers."""

    def __init__(
        self, base_url: str, api_key: str, timeout: float, http_client: Any = None
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.headers = request_headers(api_key)
        self.owns_http = http_client is None
        self.http: httpx.AsyncClient = http_client or httpx.AsyncClient(
            timeout=httpx.Timeout(timeout),
            # The SDK's pool sizes and redirect rule.
            limits=httpx.Limits(max_connections=1000, max_keepalive_connections=100),
            follow_redirects=True,
            verify=tls_context(),
        )

    @property
    def root(self) -> str:
        """The server's root: llama.cpp's /props and Ollama's /api/* sit beside /v1."""
        return self.base_url.removesuffix("/v1")

    async def send(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, quiet: bool = False
    ) -> httpx.Response:
        """Send `path` (under the base URL, or a whole URL) with the answer's body left as a
        stream; httpx's own failures become our connection and timeout errors, and a 4xx/5xx
        answer raises its status error once its body is read (and logged, masked)."""
        content = encode(body) if body is not None else None
        url = path if "://" in path else self.base_url + path
        request = self.http.build_request(method, url, content=content, headers=self.headers)
        with transport_errors():
            response = await self.http.send(request, stream=True)
        if response.status_code >= 400:
            raw = b""
            try:
                raw = await response.aread()
            except httpx.RequestError:
                pass  # the status alone still says what happened
            finally:
                await response.aclose()
            error = status_error(response.status_code, response.headers, raw)
            said = raw.decode("utf-8", "replace").strip()[:2000]
            log.log(
                logging.DEBUG if quiet else logging.WARNING,
                "%s %s answered HTTP %s: %s",
                *(method, path, error.status_code, self.mask(said)),
            )
            raise error from None
        return response

    async def call(
        self, method: str, path: str, body: dict[str, Any] | None = None, *, quiet: bool = False
    ) -> Any:
        """One non-streamed request; its JSON answer (`quiet`: an error status is expected,
        logged only at debug level)."""
        response = await self.send(method, path, body, quiet=quiet)
        try:
            with transport_errors():
                raw = await response.aread()
        finally:
            await response.aclose()
        try:
            return orjson.loads(raw)
        except ValueError:
            raise ResponseDataError("the model provider sent a malformed answer") from None

    def mask(self, text: str) -> str:
        """A provider's words with our key taken out (some echo the request's headers)."""
        return Scrubber([self.headers["Authorization"][7:]]).scrub(text)

    async def aclose(self) -> None:
        if self.owns_http:
            await self.http.aclose()


Ask = tuple[str, str, Any, Callable[[Any], T | None]]  # method, URL, body, how to read it


async def first_said(endpoint: Endpoint, asks: Iterable[Ask[T]]) -> tuple[T | None, bool]:
    """The first answer found by `asks`, questions that only some kinds of server answer
    (llama.cpp's /props, Ollama's /api/*), and whether the server could be asked at all
    (False: down, or llama-server's 503 while it loads its model; ask again later)."""
    for method, url, body, read in asks:
        try:
            found = read(await endpoint.call(method, url, body, quiet=True))
        except APIConnectionError:
            return None, False  # down: the other questions would fail the same way
        except APIStatusError as exc:
            if exc.status_code == 503:
                return None, False
            continue  # this server does not answer that question
        except APIError:
            continue  # nor in a form we read
        if found:
            return found, True
    return None, True


@contextmanager
def transport_errors() -> Iterator[None]:
    """httpx's own failures (sending, or reading a body) as our timeout and connection errors."""
    try:
        yield
    except httpx.TimeoutException as exc:
        raise APITimeoutError() from exc
    except httpx.RequestError as exc:
        raise APIConnectionError() from exc


def encode(body: dict[str, Any]) -> bytes:
    """Compact UTF-8 JSON; orjson takes a fifth of json's time on a long history."""
    try:
        return orjson.dumps(body)
    except TypeError:  # what orjson refuses (non-string keys, huge ints), json still takes
        import json

        return json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode()


async def open_stream(
    endpoint: Endpoint, body: dict[str, Any], heard: Callable[[], None] | None = None
) -> AsyncGenerator[dict[str, Any]]:
    """POST `body` (stream=True) and, once the status is known to be good, the stream's
    JSON events as dicts, `heard` told of each as it comes (the call's watch for silence).
    A 4xx/5xx raises its status error before any event."""
    response = await endpoint.send("POST", "/chat/completions", body)
    return _events(endpoint, response, heard)


async def _events(
    endpoint: Endpoint, response: httpx.Response, heard: Callable[[], None] | None
) -> AsyncGenerator[dict[str, Any]]:
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
                event = _parse(endpoint, sse.data)
                if heard is not None:
                    heard()
                yield event
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
