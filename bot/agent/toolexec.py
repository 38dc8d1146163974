"""Runs a round of tool calls: parse, validate, the tool's own checks (Tool.refuses), pass
the features' gates (tools/hooks.py Gate), run, and turn every failure into text for the
model; calls over the request's cap are answered with a note instead of being run. A
result its tool declares outside content (tools/effects.py), or returns as FromOutside, is
marked so for the model and in the history, and the turn has seen it once the round is over
(the gate asks before the next writing call).

A writing call is recorded as it starts (`on_start`, past the gates), so a continuation of
a round the process stopped in runs again only what is safe: a call its tool declares to
write nothing (tools/effects.py), or one that had not started (it was waiting at a gate); a
writing call that had started is not (it may or may not have finished), and the model and
the person are told so."""

from __future__ import annotations

import asyncio
import json
import logging
import time
from collections.abc import Awaitable, Callable
from typing import Any

from pydantic import ValidationError

from db.conversation import ToolResult
from tools.base import (
    FromOutside,
    RequestContext,
    RequestTools,
    ToolCall,
    ToolError,
    ToolOutput,
)
from tools.chat import LLMToolCall
from tools.effects import SEEN, marks, outside_note
from tools.hooks import Gate

log = logging.getLogger(__name__)

RESULT_LIMIT = 16_000  # characters of a result the model sees
CUT = "cut by a restart"  # the error of a writing call a restart cut mid-run
CUT_TEXT = (
    "Not run again: I was restarted while this call was running, so it may or may not have "
    "finished. Do not repeat it unasked: tell the user, who can check."
)


def cut_line(name: str) -> str:
    """What the person reads of a writing call a restart cut."""
    return f"I was restarted while running {name}; it may or may not have finished."


def render(output: ToolOutput) -> str:
    text = (
        output if isinstance(output, str) else json.dumps(output, ensure_ascii=False, default=str)
    )
    if len(text) > RESULT_LIMIT:
        text = text[:RESULT_LIMIT] + f"\n[... truncated {len(text) - RESULT_LIMIT} characters]"
    return text


def _validation_text(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        where = ".".join(str(p) for p in err["loc"]) or "arguments"
        parts.append(f"{where}: {err['msg']}")
    return "; ".join(parts)


def _parsed(tools: RequestTools, c: LLMToolCall) -> tuple[Any, Any] | None:
    """The call's tool and params, when it names a tool and its arguments are valid."""
    tool = tools.get(c.name)
    if tool is None:
        return None
    try:
        args = json.loads(c.arguments) if c.arguments.strip() else {}
        if isinstance(args, str) and tool.text_field:
            args = {tool.text_field: args}
        return tool, tool.params.model_validate(args)
    except (ValueError, RecursionError):  # ValidationError is a ValueError
        return None


def writes(tools: RequestTools, c: LLMToolCall) -> bool:
    """Whether the call may change something if it runs (as its tool declares)."""
    found = _parsed(tools, c)
    return found is not None and bool(found[0].effects_of(found[1]).writes)


OnStart = Callable[[LLMToolCall], Awaitable[None]]


async def run_call(
    tools: RequestTools,
    c: LLMToolCall,
    call: ToolCall,
    gate: Gate | None = None,
    seen: list[str] | None = None,
    on_start: OnStart | None = None,
    cut: frozenset[str] = frozenset(),
) -> ToolResult:
    """`seen` gets the outside content the call returned (its source), if any; `on_start`
    is told when a writing call starts; `cut`: the calls a stop cut mid-run (their round is
    continued), of which a writing one is not run again."""
    name, raw_args, start = c.name, c.arguments, time.perf_counter()

    def done(text: str, error: str | None = None, brief: str | None = None) -> ToolResult:
        ms = (time.perf_counter() - start) * 1000  # text: what the model sees
        return ToolResult(c.id, name, raw_args, text, error is None, error, ms, brief)

    if c.id in cut and writes(tools, c):
        return done(CUT_TEXT, CUT)
    tool = tools.get(name)
    if tool is None:
        msg = tools.unknown(name)
        return done(f"Error: {msg}", msg)
    try:
        args: Any = json.loads(raw_args) if raw_args.strip() else {}
    except json.JSONDecodeError as exc:
        if tool.text_field and raw_args.lstrip()[:1] not in "{[":
            args = raw_args  # plain text, not JSON gone wrong: the tool's text field
        else:
            msg = f"arguments are not valid JSON ({exc.msg} at character {exc.pos})"
            return done(f"Error: {msg}. Call {name} again with a JSON object.", msg)
    except RecursionError:
        # json.loads recurses once per level: thousands of nested arrays raise this, which
        # is no JSONDecodeError and used to fail the whole turn.
        msg = "arguments are nested too deeply"
        return done(f"Error: {msg}. Call {name} again with a flat JSON object.", msg)
    if isinstance(args, str) and tool.text_field:
        args = {tool.text_field: args}
    if not isinstance(args, dict):
        msg = "arguments must be a JSON object"
        return done(f"Error: {msg}.", msg)
    try:
        params = tool.params.model_validate(args)
    except ValidationError as exc:
        msg = f"invalid arguments: {_validation_text(exc)}"
        return done(f"Error: {msg}", msg)
    if tool.refuses is not None and (wrong := tool.refuses(params, call)) is not None:
        return done(f"Error: {wrong}", wrong)
    refusal = await gate.check(tool, params, args, call) if gate is not None else None
    if refusal is not None:
        return done(refusal, "not approved")
    if on_start is not None and tool.effects_of(params).writes:
        await on_start(c)
    source = tool.effects_of(params).outside
    try:
        output = await tool.run(params, call)
    except ToolError as exc:
        # A tool that reads outside content may fail in its source's words (an MCP server's
        # error result): marked like its answers, and seen.
        return done(_read(f"Error: {exc}", source, seen), str(exc))
    except Exception as exc:
        log.exception("tool %s raised", name)
        msg = f"tool {name} failed: {type(exc).__name__}"
        return done(f"Error: {msg}. It may work with other arguments.", msg)
    if isinstance(output, FromOutside):
        source, output = output.source, output.output
    text = _read(render(output), source, seen)
    return done(text, brief=None if source else tool.brief(output))


def _read(text: str, source: str | None, seen: list[str] | None) -> str:
    """What a call returned as the model reads it: marked when it came from `source`, and
    what it carries marked (this mark, or one made before: a remembered page) added to
    `seen`."""
    if source:
        text = outside_note(source) + text
    if seen is not None:
        seen += marks(text)
    return text


def repeated_failure(results: list[ToolResult], failed: set[tuple[str, str]]) -> str | None:
    """A round whose every call failed before in the request, word for word (same tool, same
    arguments): the model read the error and wrote the call again unchanged, and a small one
    does so until the cap (the 0.5B model wrote one failing call seven times). Returns
    the line that stops the task then; adds the round's failures to `failed`."""
    fails = [(r.name, r.arguments) for r in results if not r.ok]
    again = bool(results) and len(fails) == len(results) and all(k in failed for k in fails)
    failed.update(fails)
    if not again:
        return None
    error = " ".join(str(results[0].error).split())[:200]
    return (
        f"I stopped this task: the model repeated a {results[0].name} call that had already "
        f"failed ({error})."
    )


def done_before(
    tools: RequestTools, calls: list[LLMToolCall], ok: list[tuple[LLMToolCall, ToolResult]]
) -> list[ToolResult] | None:
    """The earlier results when every call of a round is one that already succeeded in the
    request (`ok`: calls and their results), the same tool with the same arguments once
    validated (an `action` the model left out and then wrote counts as the same); else None.
    A small model that has its result and does not know how to go on writes the call again,
    and again (the 1.5B model ran `12345 * 6789` twice, then answered "I apologize, but I'm
    unable to assist"): running it again changes nothing for a read and doubles a write."""
    if not calls or not ok:
        return None
    known = []
    for c, result in ok:
        if (found := _parsed(tools, c)) is not None:
            known.append(((found[0].name, found[1].model_dump()), result))
    earlier: list[ToolResult] = []
    for c in calls:
        found = _parsed(tools, c)
        key = (found[0].name, found[1].model_dump()) if found is not None else None
        match = next((r for k, r in known if k == key), None)
        if match is None:
            return None
        earlier.append(match)
    return earlier


def wire_calls(calls: list[LLMToolCall]) -> list[dict[str, Any]]:
    """The assistant message's tool calls as the OpenAI wire shape. Arguments that are no
    JSON (a small model's `"arguments": "for (let i = 1; ..."`) are sent back as a JSON
    string: llama-server refuses a whole request whose history holds a call it cannot parse
    (HTTP 500, every try), and the call's error already told the model what was wrong."""
    return [
        {
            "id": c.id,
            "type": "function",
            "function": {"name": c.name, "arguments": _as_json(c.arguments)},
        }
        for c in calls
    ]


def _as_json(arguments: str) -> str:
    try:
        json.loads(arguments)
    except (ValueError, RecursionError):  # nested past what the call's own check reads
        return json.dumps(arguments, ensure_ascii=False)
    return arguments


async def run_round(
    tools: RequestTools,
    ctx: RequestContext,
    calls: list[LLMToolCall],
    reasoning: str,
    *,
    used: int,
    cap: int,
    gate: Gate | None = None,
    on_start: OnStart | None = None,
    cut: frozenset[str] = frozenset(),
) -> list[ToolResult]:
    """Calls run at once while the request has room under `cap` (`used` so far); the rest
    are answered that the cap was reached."""
    seen: list[str] = []
    ran = await asyncio.gather(
        *(
            run_call(tools, c, ToolCall(ctx, c.id, reasoning), gate, seen, on_start, cut)
            for c in calls[: max(0, cap - used)]
        )
    )
    # After the round: calls of one round were chosen before any of its results was read.
    ctx.state(SEEN).add(seen)
    note = f"Not run: the limit of {cap} tool calls for this message was reached."
    capped = [
        ToolResult(c.id, c.name, c.arguments, note, False, "tool-call cap reached", 0.0)
        for c in calls[len(ran) :]
    ]
    return [*ran, *capped]
