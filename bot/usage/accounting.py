"""/context's bookkeeping as an agent hook: the token split of each user's last request."""

from __future__ import annotations

from dataclasses import dataclass

from bot.agent.hooks import AgentHooks, ModelRequest
from bot.agent.prompt import without_context
from tools.discovery.context_log import ContextLog
from tools.tokens import count_payload


@dataclass
class ContextAccounting(AgentHooks):
    log: ContextLog

    async def on_model_request(self, req: ModelRequest) -> None:
        # Only kept here; ContextLog counts when /context asks (the prompt once per
        # request, the tools payload of the latest call).
        schemas = req.tools
        names = [t["function"]["name"] for t in schemas]
        user = req.ctx.user_id
        if not (req.turn and self.log.has(user)):
            p = req.parts
            # The recalled sections ride in the newest user turn (bot/agent/prompt.py):
            # counted as memory, not as history, as when they sat in the system prompt.
            system = "\n\n".join([p.system, *p.sections])
            history = [
                {**m, "content": without_context(m["content"])} if m["role"] == "user" else m
                for m in p.history
            ]
            self.log.record(user, req.ctx.now(), system, p.sections, history)
        self.log.set_tools(user, lambda: count_payload(schemas), names)
