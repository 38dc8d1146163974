"""The model client's protocol: everything the agent, its history window and the summaries
ask of a chat model, in one type.

LLMClient (bot/llm/client.py) is the model; MeteredModel (bot/usage/meter.py) and
VisionGate (bot/llm/vision.py) wrap it, and each wrapper implements every member, passing on
explicitly what it does not change. A wrapper that left one out would not be a ChatModel, and
the type checker refuses it where the app wires it in: a capability looked up at run time
instead went missing behind the vision gate once, and with it history compression and the
server's context size.
"""

from __future__ import annotations

from typing import Any, Protocol

from bot.llm.completion import Completion, OnText
from tools.model_call import ModelCall

# The types its members speak, from the one place a caller of a model imports.
__all__ = ["ChatModel", "Completion", "OnText"]


class ChatModel(Protocol):
    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Completion:
        """One streamed chat completion, with tools (`model`: default LLM_MODEL); `on_text`
        gets the whole text so far after each delta. `on_wait`: someone waits for this
        answer, so an outage is waited out, and it gets the line to tell them."""
        ...

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Completion:
        """One plain completion with its usage. `call` says for whom and why, so a metering
        wrapper can check the budget first (BudgetExceeded) and record the usage."""
        ...

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str:
        """The text of `complete`: what summaries and tools need (a ChatModel is a TextModel,
        tools/base.py)."""
        ...

    async def context_tokens(self, model: str | None = None) -> int | None:
        """How many tokens `model`'s context holds (default LLM_MODEL): LLM_CONTEXT_TOKENS,
        else what the server says (llama.cpp, Ollama), else None (unknown)."""
        ...
