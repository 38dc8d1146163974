"""The model tools and archiving use (TextModel), metered: budget checked first, usage
recorded after, in its own transaction (these calls are off the chat's hot path)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from bot.llm.client import LLMClient
from bot.usage.meter import Meter
from tools.model_call import BudgetExceeded, ModelCall

log = logging.getLogger(__name__)

UNATTRIBUTED = ModelCall("chat")


@dataclass
class MeteredModel:
    llm: LLMClient
    meter: Meter

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str:
        call = call or UNATTRIBUTED
        refusal = await self.meter.refusal(call.user_id)
        if refusal is not None:
            raise BudgetExceeded(refusal)
        out = await self.llm.complete(messages, max_tokens)
        try:
            async with self.meter.sf() as s, s.begin():
                await self.meter.record(s, call, out, messages)
        except Exception:  # the answer is worth more than its usage row
            log.exception("could not record the usage of a %s call", call.purpose)
        return out.content
