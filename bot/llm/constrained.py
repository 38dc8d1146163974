"""Replies held by the server to "an answer" or "a call of one offered tool", where it can.

A small local model chooses the right tool but writes the call in a form of its own
(`<tools><function name=...>`, fences, bare JSON), and every form it invents is one more for
the written-call reader. llama.cpp's server (and Ollama's) can instead hold a reply to a
JSON schema, sampling only tokens that keep it valid. With tools offered, the reply is asked
as one of

    {"answer": "<what the person reads>"}
    {"name": "<an offered tool>", "arguments": {<valid for that tool's schema>}}

(the second is the object Qwen's and Hermes' templates put inside `<tool_call>`, so the
model writes what it was trained to). The request still carries `tools`, so the chat
template shows them to the model as usual; only what it may write is held.

A tool may hold its arguments to a stricter schema than the one the model reads (Tool.held:
the argument sets it accepts). Once a round of calls has given its results with no error,
the reply is held to the answer alone (answer_due).

`Constraint` says per server whether to ask (LLM_CONSTRAINED_CALLS: `auto` asks llama.cpp's
server and Ollama, detected as the context probe does, for a model under SMALL_MODEL
parameters or of a size not said; `on` every server, `off` none);
a server that refuses the field is not asked again (client.LLMClient._adapted). `drafts`
shows the answer's text as it streams, `adopt` turns the finished reply into the
completion's text or tool call. A reply that is no such JSON (a server that ignored the
field) is left to the written-call reader.
"""

from __future__ import annotations

import json
import logging
import re
import uuid
from collections.abc import Awaitable, Callable, Collection
from itertools import takewhile
from typing import Any

from bot.llm.wire import Endpoint, first_said
from tools.chat import HELD, SMALL_MODEL, Completion, LLMToolCall, OnText

log = logging.getLogger(__name__)

ANSWER = "answer"
# The temperature a local server samples a reply with when tools are offered. At its default
# (llama.cpp's and Ollama's 0.8) the 1.5B model stored "Lives in Berlin" (the tool
# description's example) for "Remember that my sister's name is Ana." in two runs of two,
# and deleted a memory asked "How many days until 2027-01-01?"; at 0 it called the right
# tool with the person's words (bench/tool_use.py, figures in the notes). A call is
# a decision, not prose to vary: the reply most likely is the one wanted.
TOOL_TEMPERATURE = 0.0
_FAILED = re.compile(r"\s*Error\b")
_ANSWER_HEAD = re.compile(r'\s*\{\s*"answer"\s*:\s*"')
_CALL_HEAD = re.compile(r'\s*\{\s*"name"\s*:')
# A string's raw content up to its closing quote (or the end so far).
_RAW_STRING = re.compile(r'(?:\\.|[^"\\])*', re.S)
# An escape not finished yet, or the first half of a surrogate pair without its second.
_OPEN_ESCAPE = re.compile(r"\\(?:u[0-9a-fA-F]{0,3})?$|\\u[dD][89abAB][0-9a-fA-F]{2}$")


def reply_schema(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The JSON schema of a reply: an answer, or a call of one of `tools` (OpenAI's tool
    entries) with arguments valid for its parameters."""
    answer = {
        "type": "object",
        "properties": {ANSWER: {"type": "string"}},
        "required": [ANSWER],
        "additionalProperties": False,
    }
    calls = []
    for tool in tools:
        fn = tool.get("function") or {}
        if not isinstance(fn.get("name"), str):
            continue
        calls.append(
            {
                "type": "object",
                "properties": {
                    "name": {"const": fn["name"]},
                    "arguments": fn.get(HELD) or fn.get("parameters") or {"type": "object"},
                },
                "required": ["name", "arguments"],
                "additionalProperties": False,
            }
        )
    return {"anyOf": [answer, *calls]}


def answer_due(messages: list[dict[str, Any]]) -> bool:
    """The messages end with a round of tool results and none of them is an error (the
    loop's failed calls say `Error: …`, bot/agent/toolexec.py): the reply is the answer.
    Held, the 1.5B model never chose the answer after a result while a call stayed open: it
    wrote the same call again (13 of 13 tool turns of the recorded day), stored what a
    program printed as a memory, or started a new session (bench/tool_use.py --day,
    2026-12-06); offered only the tools it had not used yet, it went on to those. Its
    results in hand, the model answers from them; a call that failed stays open to be made
    again, corrected. (A task of several successful steps is one step a message, held.)"""
    results = list(takewhile(lambda m: m.get("role") == "tool", reversed(messages)))
    return bool(results) and not any(_FAILED.match(str(m.get("content") or "")) for m in results)


def response_format(tools: list[dict[str, Any]]) -> dict[str, Any]:
    """The request's `response_format` (OpenAI's structured-output field, which llama.cpp's
    server, Ollama and vLLM read as a grammar)."""
    return {"type": "json_schema", "json_schema": {"name": "reply", "schema": reply_schema(tools)}}


def answer_so_far(text: str) -> str | None:
    """The answer's text in a reply streamed so far; None while it is not (yet) an answer."""
    head = _ANSWER_HEAD.match(text)
    if head is None:
        return None
    raw = _RAW_STRING.match(text, head.end())
    assert raw is not None  # the pattern matches the empty string
    piece = _OPEN_ESCAPE.sub("", raw.group())
    try:
        decoded: str = json.loads(f'"{piece}"')
    except ValueError:  # a control character the grammar let through: show it as it came
        return piece
    return decoded


def drafts(shown: OnText | None) -> OnText | None:
    """`shown` fed with the answer's text instead of the JSON around it; a reply that is no
    JSON at all (the server did not hold it) goes on as it is, and a call is never shown."""
    if shown is None:
        return None

    async def draft(text: str) -> None:
        start = text.lstrip()[:1]
        if start and start != "{":
            await shown(text)
            return
        answer = answer_so_far(text)
        if answer:
            await shown(answer)

    return draft


def adopt(completion: Completion, offered: Collection[str]) -> bool:
    """Read a held reply into `completion`: its answer becomes the text, its call the one
    tool call. False when the reply is not such JSON (the written-call reader's turn)."""
    if completion.tool_calls:  # the server read the call itself
        return True
    text = completion.content
    try:
        reply = json.loads(text)
    except ValueError:
        answer = answer_so_far(text)
        if answer is not None:  # cut at the output limit mid-answer: what there is
            completion.content = answer
            return True
        if completion.truncated and _CALL_HEAD.match(text):
            completion.content, completion.cut_call = "", True
            return True
        return False
    if not isinstance(reply, dict):
        return False
    if set(reply) == {ANSWER} and isinstance(reply[ANSWER], str):
        completion.content = reply[ANSWER]
        return True
    name, arguments = reply.get("name"), reply.get("arguments")
    if (
        set(reply) == {"name", "arguments"}
        and isinstance(name, str)
        and name in offered
        and isinstance(arguments, dict)
    ):
        call_id = f"call_{uuid.uuid4().hex[:12]}"
        completion.tool_calls = [LLMToolCall(call_id, name, json.dumps(arguments))]
        completion.content = ""
        if completion.finish_reason in ("stop", None):
            completion.finish_reason = "tool_calls"
        return True
    return False


def _llama_cpp(raw: Any) -> bool:
    return isinstance(raw, dict) and isinstance(raw.get("default_generation_settings"), dict)


def _ollama(raw: Any) -> bool:
    """Ollama's version answer, from 0.5 (structured outputs) on."""
    version = raw.get("version") if isinstance(raw, dict) else None
    parts = re.match(r"(\d+)\.(\d+)", version) if isinstance(version, str) else None
    return parts is not None and (int(parts[1]), int(parts[2])) >= (0, 5)


_SERVERS = (("/props", _llama_cpp), ("/api/version", _ollama))


class Constraint:
    """Whether a server's chat replies are asked as held JSON (LLM_CONSTRAINED_CALLS): `on`,
    `off`, or `auto`: llama.cpp's server (GET /props) and Ollama (GET /api/version) hold a
    reply to a schema; other servers are not asked to. Which server it is (`local`) is asked
    once per server; one that could not be asked (down, loading) is asked again with the
    next request. A server that is not local, in a mode that asks only local ones (or that
    refused the field), is `free` once that is known: its requests need no question here."""

    def __init__(self, mode: str) -> None:
        self.mode = mode
        self.known: dict[str, bool] = {}
        self.servers: dict[str, bool] = {}
        self.free: set[str] = set()  # base URLs: replies go as they are, at its temperature

    async def plan(
        self, endpoint: Endpoint, size: Callable[[], Awaitable[int | None]]
    ) -> tuple[bool, bool]:
        """(held, local) for a request with tools offered: `wanted`, and `local` (sampled at
        TOOL_TEMPERATURE)."""
        return await self.wanted(endpoint, size), await self.local(endpoint)

    async def wanted(self, endpoint: Endpoint, size: Callable[[], Awaitable[int | None]]) -> bool:
        """`size`: the model's parameters, where the server says (asked only for `auto` on a
        local server). A model of SMALL_MODEL or more is not held: it sends native calls well
        and may chain several rounds of them, which a held reply (the answer due once a
        round succeeded) would cut to one. A model whose size is not said is held."""
        if endpoint.base_url in self.known:
            return self.known[endpoint.base_url]
        if self.mode != "auto":
            return self.mode == "on"
        if not await self.local(endpoint):
            return False
        parameters = await size()
        return parameters is None or parameters < SMALL_MODEL

    async def local(self, endpoint: Endpoint) -> bool:
        """The server is llama.cpp's or Ollama: a model on the person's own machine, most
        often a small one, sampled at the server's default temperature (0.8) unless the
        request says otherwise (TOOL_TEMPERATURE)."""
        if endpoint.base_url not in self.servers:
            found = await self._ask(endpoint)
            if found is None:
                return False
            self.servers[endpoint.base_url] = found
            log.info("%s: %s", endpoint.base_url, "a local server" if found else "not local")
            self._settle(endpoint)
        return self.servers[endpoint.base_url]

    def refused(self, endpoint: Endpoint) -> None:
        """The server refused the field: its replies go free from now on."""
        self.known[endpoint.base_url] = False
        self._settle(endpoint)

    def _settle(self, endpoint: Endpoint) -> None:
        url = endpoint.base_url
        held = self.known.get(url, self.mode == "on")
        if self.servers.get(url) is False and not held:
            self.free.add(url)

    async def _ask(self, endpoint: Endpoint) -> bool | None:
        asks = [("GET", endpoint.root + path, None, read) for path, read in _SERVERS]
        found, heard = await first_said(endpoint, asks)
        return bool(found) if heard else None
