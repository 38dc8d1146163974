"""The model, metered where a call says for whom and why (plain completions: summaries,
code generation): budget checked first, usage recorded after, in its own transaction (these
calls are off the chat's hot path).

The chat's streams pass through: the request they belong to meters them (bot/usage/
request.py checks the budget before each model call and hands the usage row to the
transaction that stores the answer), so metering them here too would count them twice.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.llm.completion import Completion, OnText
from bot.llm.model import ChatModel
from bot.usage.meter import Meter
from tools.model_call import BudgetExceeded, ModelCall

log = logging.getLogger(__name__)

UNATTRIBUTED = ModelCall("chat")


@dataclass
class MeteredModel:
    llm: ChatModel
    meter: Meter

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Completion:
        return await self.llm.stream(messages, tools, on_text, model=model, on_wait=on_wait)

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Completion:
        call = call or UNATTRIBUTED
        refusal = await self.meter.refusal(call.user_id)
        if refusal is not None:
            raise BudgetExceeded(refusal)
        out = await self.llm.complete(messages, max_tokens, model=model)  # metered once: here
        try:
            async with self.meter.sf() as s, s.begin():
                await self.meter.record(s, call, out, messages)
        except Exception:  # the answer is worth more than its usage row
            log.exception("could not record the usage of a %s call", call.purpose)
        return out

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str:
        return (await self.complete(messages, max_tokens, call=call)).content

    async def context_tokens(self, model: str | None = None) -> int | None:
        return await self.llm.context_tokens(model)
