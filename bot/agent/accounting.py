"""/context's bookkeeping as an agent hook: the token split of each user's last request."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.hooks import AgentHooks, ModelRequest
from tools.discovery.context_log import ContextLog, split_of
from tools.tokens import count_payload


@dataclass
class ContextAccounting(AgentHooks):
    log: ContextLog

    async def on_model_request(self, req: ModelRequest) -> None:
        tokens = count_payload(req.tools) if req.tools else 0
        names = [t["function"]["name"] for t in req.tools]
        split = self.log.get(req.ctx.user_id) if req.turn else None
        if split is None:  # the prompt is counted once per request; tools change per call
            p = req.parts
            split = split_of(p.system, p.sections, p.history, tokens, req.ctx.now())
            self.log.put(req.ctx.user_id, split)
        split.tools, split.tool_names = tokens, names
