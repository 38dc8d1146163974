"""Agent hooks: what happens around the loop without living inside it.

In the spirit of openai-agents' RunHooks: the runner calls a few hooks at fixed points
(before and after each model call, after each tool round, with the final answer), and
recording, /context accounting and usage hang on them instead of side channels.
A hook that raises HookRefusal before a model call stops the request with its text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from bot.llm.client import Completion, LLMToolCall
from db.conversation import ToolResult
from tools.base import RequestContext


@dataclass
class PromptParts:
    """What the prompt was built from (for /context's split)."""

    system: str
    sections: list[str]
    history: list[dict[str, Any]]


@dataclass
class ModelRequest:
    ctx: RequestContext
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    parts: PromptParts
    turn: int  # 0 for the first model call of the request


@dataclass
class ToolRound:
    """One assistant message with tool calls, and what each call returned."""

    ctx: RequestContext
    content: str
    wire_calls: list[dict[str, Any]]
    calls: list[LLMToolCall]
    outcomes: list[ToolResult]


class HookRefusal(Exception):
    """Raised by a hook to stop a request before a model call; the text is the answer."""


class AgentHooks:
    """Every hook is optional: override what you need."""

    async def on_model_request(self, req: ModelRequest) -> None:
        return None

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        return None

    async def on_tool_round(self, round_: ToolRound) -> None:
        return None

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        return None


@dataclass
class HookChain(AgentHooks):
    """Hooks run in order; the first to raise stops the rest."""

    hooks: list[AgentHooks] = field(default_factory=list)

    async def on_model_request(self, req: ModelRequest) -> None:
        for h in self.hooks:
            await h.on_model_request(req)

    async def on_model_response(self, req: ModelRequest, completion: Completion) -> None:
        for h in self.hooks:
            await h.on_model_response(req, completion)

    async def on_tool_round(self, round_: ToolRound) -> None:
        for h in self.hooks:
            await h.on_tool_round(round_)

    async def on_answer(self, ctx: RequestContext, answer: str) -> None:
        for h in self.hooks:
            await h.on_answer(ctx, answer)
