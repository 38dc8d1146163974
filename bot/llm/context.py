"""How many tokens the model's context holds: LLM_CONTEXT_TOKENS when set, else what the
server says where it says it, asked once per model.

- llama.cpp: GET /props (`default_generation_settings.n_ctx`), or the `meta.n_ctx` of its
  model list;
- Ollama: POST /api/show, the `num_ctx` it runs with when set, else `model_info`'s
  `<arch>.context_length`.
Other servers (and cloud providers) do not say: the answer is None, unknown. A server
that could not be asked (down, or llama-server's 503 while it loads its model) is asked
again with the next message rather than taken for one that does not say.
"""

from __future__ import annotations

import logging
from typing import Any

from bot.llm.wire import APIConnectionError, APIError, APIStatusError, Endpoint

log = logging.getLogger(__name__)


def _positive(value: object) -> int | None:
    return value if isinstance(value, int) and value > 0 else None


def _from_props(raw: Any) -> int | None:
    settings = raw.get("default_generation_settings") if isinstance(raw, dict) else None
    return _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None


def _from_models(raw: Any, model: str) -> int | None:
    data = raw.get("data") if isinstance(raw, dict) else None
    for entry in data if isinstance(data, list) else ():
        if isinstance(entry, dict) and entry.get("id") == model:
            meta = entry.get("meta")
            return _positive(meta.get("n_ctx")) if isinstance(meta, dict) else None
    return None


def _from_ollama(raw: Any) -> int | None:
    if not isinstance(raw, dict):
        return None
    for line in str(raw.get("parameters") or "").splitlines():
        name, _, value = line.strip().partition(" ")
        if name == "num_ctx" and value.strip().isdigit():
            return int(value.strip())
    info = raw.get("model_info")
    found = (
        [v for k, v in info.items() if k.endswith(".context_length")]
        if isinstance(info, dict)
        else []
    )
    return _positive(found[0]) if found else None


class ContextSize:
    def __init__(self, endpoint: Endpoint, configured: int) -> None:
        self.endpoint = endpoint
        self.configured = configured
        self.known: dict[str, int | None] = {}

    async def tokens(self, model: str) -> int | None:
        if self.configured:
            return self.configured
        if model in self.known:
            return self.known[model]
        found, heard = await self._ask(model)
        if heard:
            self.known[model] = found
            log.info("context of %s: %s tokens", model, found or "unknown")
        return found

    async def _ask(self, model: str) -> tuple[int | None, bool]:
        """The context size the server says, and whether the server could be asked at all
        (False: ask again later)."""
        # The server's root: /props and /api/show sit beside /v1, not under it.
        base = self.endpoint.base_url
        root = base[: -len("/v1")] if base.endswith("/v1") else base
        asks = (
            ("GET", root + "/props", None, _from_props),
            ("GET", base + "/models", None, lambda raw: _from_models(raw, model)),
            ("POST", root + "/api/show", {"model": model}, _from_ollama),
        )
        for method, url, body, read in asks:
            try:
                found = read(await self.endpoint.call(method, url, body, quiet=True))
            except APIConnectionError:
                return None, False  # down: the other questions would fail the same way
            except APIStatusError as exc:
                if exc.status_code == 503:  # llama-server while it loads its model
                    return None, False
                continue  # this server does not answer that question
            except APIError:
                continue  # nor in a form we read
            if found:
                return found, True
        return None, True
