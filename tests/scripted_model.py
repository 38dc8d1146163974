"""A scripted in-process model implementing the agent's ChatModel protocol (and the
tools' TextModel), for fast unit tests of the loop: no HTTP, no SDK, replies in order.

The loopback-HTTP fake (tests/fakes/openai_server.py) stays the e2e tier: it runs the real
model client (bot/llm, over httpx). This one answers in microseconds, so loop logic can be
tested in bulk.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tools.chat import Completion, LLMToolCall, OnText


@dataclass
class Say:
    text: str


@dataclass
class Call:
    calls: list[tuple[str, dict[str, Any] | str]]  # (tool name, arguments or raw JSON text)


Step = Say | Call


def raw(args: dict[str, Any] | str) -> str:
    return args if isinstance(args, str) else json.dumps(args)


@dataclass
class ScriptedModel:
    script: list[Step] = field(default_factory=list)
    requests: list[list[dict[str, Any]]] = field(default_factory=list)
    tools_seen: list[list[str]] = field(default_factory=list)
    # Answers plain completions (summaries, reviews) from their messages when set, so a
    # long chat's script need not know when a summary will be asked for.
    writer: Callable[[list[dict[str, Any]]], str] | None = None
    written: list[list[dict[str, Any]]] = field(default_factory=list)
    context: int | None = None  # what context_tokens() says (None: a server that won't say)

    def add(self, *steps: Step) -> None:
        self.script.extend(steps)

    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Completion:
        self.requests.append([dict(m) for m in messages])
        self.tools_seen.append([t["function"]["name"] for t in tools or []])
        if not self.script:
            raise AssertionError("the script ran out: the agent asked for one more model turn")
        step = self.script.pop(0)
        if isinstance(step, Say):
            if on_text is not None:
                await on_text(step.text)
            return Completion(content=step.text, finish_reason="stop")
        calls = [
            LLMToolCall(
                f"call_{len(self.requests)}_{i}", name, a if isinstance(a, str) else json.dumps(a)
            )
            for i, (name, a) in enumerate(step.calls)
        ]
        return Completion(tool_calls=calls, finish_reason="tool_calls")

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: object = None,
    ) -> Completion:
        if self.writer is not None:
            self.written.append(messages)
            return Completion(content=self.writer(messages), finish_reason="stop")
        return await self.stream(messages)

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: object = None,
    ) -> str:
        return (await self.complete(messages, max_tokens)).content

    async def context_tokens(self, model: str | None = None) -> int | None:
        return self.context

    async def parameters(self, model: str | None = None) -> int | None:
        return None  # a server that does not say
