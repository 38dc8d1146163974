"""/context's bookkeeping as an agent hook: the token split of each user's last request."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.agent.hooks import AgentHooks, ModelRequest
from tools.discovery.context_log import ContextLog
from tools.tokens import count_payload

# A tool schema as the key of its payload's count: its name, description and parameters
# object (the Tool's own, the same on every request). The cache entry holds the parameters
# objects, so an id in a key cannot be reused by another object while the entry lives.
_Key = tuple[tuple[Any, Any, int], ...]
_CACHE_MAX = 64


def _key(schemas: list[dict[str, Any]]) -> _Key | None:
    out = []
    for s in schemas:
        fn = s.get("function")
        if not isinstance(fn, dict):
            return None
        out.append((fn.get("name"), fn.get("description"), id(fn.get("parameters"))))
    return tuple(out)


@dataclass
class ContextAccounting(AgentHooks):
    log: ContextLog
    # Tools payload token counts: encoding the whole tools array as JSON on every model
    # call (to look its count up) cost more than the rest of this hook.
    _counts: dict[_Key, tuple[int, list[Any]]] = field(default_factory=dict, repr=False)

    def _tools_tokens(self, schemas: list[dict[str, Any]]) -> int:
        key = _key(schemas)
        if key is None:
            return count_payload(schemas)
        known = self._counts.get(key)
        if known is None:
            if len(self._counts) >= _CACHE_MAX:
                self._counts.clear()
            params = [s["function"].get("parameters") for s in schemas]
            known = self._counts[key] = (count_payload(schemas), params)
        return known[0]

    async def on_model_request(self, req: ModelRequest) -> None:
        # Only kept here; ContextLog counts when /context asks (the prompt once per
        # request, the tools payload of the latest call).
        schemas = req.tools
        names = [t["function"]["name"] for t in schemas]
        user = req.ctx.user_id
        if not (req.turn and self.log.has(user)):
            p = req.parts
            self.log.record(user, req.ctx.now(), p.system, p.sections, p.history)
        self.log.set_tools(user, lambda: self._tools_tokens(schemas) if schemas else 0, names)
