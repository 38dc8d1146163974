"""What the benchmarks on a real llama-server share (prefix_cache.py, tool_use.py): the chat
server of `make test-real`, the assembled app in front of it behind the real tier's
recording proxy, and a prompt's tokens as the chat model's tokenizer counts them."""

from __future__ import annotations

import logging
import signal
import sys
import tempfile
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path
from typing import Any

from bot.app import App, build_app
from bot.llm import client as llm_client
from bot.llm.client import LLMClient
from tests.conftest import make_settings
from tests.real.proxy import RecordingProxy
from tests.real.servers import LlamaServer, manifest, start_chat


@contextmanager
def chat_server(model: Path | None = None) -> Iterator[tuple[LlamaServer, str]]:
    """The chat model's server, started (and always stopped) for the bench, and the model's
    name (`model`: another GGUF than the real tier's, named by its file); the app's warnings
    are kept out of the figures."""
    logging.disable(logging.WARNING)
    # SIGTERM unwinds like Ctrl-C does, so the server below is stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    found = manifest()
    if found is None:
        raise SystemExit("llama-server is not installed: run `python scripts/real_llm.py`")
    if model is not None:
        found = {**found, "chat_model": str(model), "chat_model_name": model.stem}
    with tempfile.TemporaryDirectory() as logs:
        server = start_chat(found, Path(logs) / "chat-server.log")
        try:
            yield server, found["chat_model_name"]
        finally:
            server.stop()


@asynccontextmanager
async def assembled(
    server: LlamaServer, name: str, max_tokens: int, **settings: Any
) -> AsyncIterator[tuple[App, RecordingProxy]]:
    """The app as `sidekick run` builds it (the real agent, tools and LLM client) on a fresh
    data folder, its model calls through a recording proxy that caps answers at
    `max_tokens`; `settings` as for make_settings."""
    proxy = await RecordingProxy(server.url, max_tokens=max_tokens).start()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            built = make_settings(
                Path(tmp), None, llm_base_url=proxy.base_url, llm_model=name, **settings
            )
            llm_client.MAX_RETRIES = 0  # one try: a retry would double a slow CPU call
            app = await build_app(built, llm=LLMClient(built))
            try:
                yield app, proxy
            finally:
                await app.close()
    finally:
        await proxy.stop()


def prompt_tokens(server: LlamaServer, first: dict[str, Any]) -> tuple[int, int]:
    """(with tools, without tools): the first request's prompt as the model's tokenizer
    counts it (chat template applied by the server itself)."""

    def count(body: dict[str, Any]) -> int:
        prompt = server.post("/apply-template", body)["prompt"]
        return len(server.post("/tokenize", {"content": prompt})["tokens"])

    with_tools = {"messages": first["messages"], "tools": first.get("tools") or []}
    return count(with_tools), count({"messages": first["messages"]})
