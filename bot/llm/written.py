"""Tool calls the model wrote out as text, read as the calls they mean.

The model's own: tool calls it wrote out as text instead of sending them as tool calls.
Small local models (Qwen2.5-Coder 0.5B-1.5B behind llama-server, recorded in
tests/fixtures/llm/written/) answer with the call itself as their reply's text, and once such
a reply sits in the history every later one copies it. The forms met:

- a JSON object `{"name": <tool>, "arguments" | "parameters": {...}}`, bare or in a ```json
  fence, one per line for several calls, sometimes with doubled braces `{{...}}`, sometimes
  with a JavaScript template string (`...`) as a value;
- `<tool_call>{...}</tool_call>` (the Qwen and Hermes chat templates' own form);
- `[TOOL_CALLS][{...}, ...]` or `[TOOL_CALLS]name[ARGS]{...}` (Mistral's templates);
- `<function=name>{...}</function>` and `<|python_tag|>{...}` (Llama 3.x's templates);
- the OpenAI wire shape `{"type": "function", "function": {"name": ..., "arguments": ...}}`.

`adopt_written` turns such a reply into the calls it means when every call names a tool
offered in that request (JSON naming anything else stays text) and the calls *are* the
reply: at most a short lead-in before them (LEAD_IN), and after a lead-in nothing but
template markup (the model imagining the result as `<tool_response>`); a reply that starts
with the call may go on (a small model imagining its result, dropped). A call the model only quotes
("the e-mail contains this block: ```json {…}``` — I would not run it") is prose around
a call, and stays text: an attacker's text the model explains must never run (`quoted`
names it: when the call is the model's own, the loop asks it once more, bot/agent/runner.py).
`Holdback` keeps text that may be starting a written call out of the streamed drafts (and
a call among words near the start), and lets it go the moment it cannot be one: a name
that was not offered, a fence of another language.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Collection, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from tools.chat import Completion, LLMToolCall, OnText

# Where a written call may begin: a template's marker, a fence, or a JSON object or list.
_MARKERS = ("<tool_call>", "[TOOL_CALLS]", "<function=", "<|python_tag|>")
_LONGEST_MARKER = max(map(len, _MARKERS))
_START = re.compile(
    r"<tool_call>|\[TOOL_CALLS\]|<function=|<\|python_tag\|>"
    r"|(?:^|(?<=\n))[ \t]*```"  # a fence at a line's start
    r"|(?:^|(?<=\n))[ \t]*[\[{]"  # JSON at a line's start
    r"|\{\s*\{?\s*\"(?:name|function|type)\""  # a call object anywhere
)
# A character every written call begins with: prose without one holds no call, and _START
# (which begins with a lookbehind, so the engine tries it at every position) need not walk it.
OPENER = re.compile(r"[<\[{`]")
_FENCE = re.compile(r"[ \t]*```[ \t]*([\w-]*)[ \t]*\n(.*?)\n?[ \t]*```", re.S)
_FENCE_HEAD = re.compile(r"[ \t]*```[ \t]*([\w-]*)[ \t]*\n")
_FENCE_OPENED = re.compile(r"```[ \t]*[\w-]*\s*$")  # a fence the cut call was in
_CALL_FENCES = ("", "json", "tool_call", "tool_code")
_TAGGED = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
_FUNCTION = re.compile(r"<function=([\w.-]+)>(.*?)(</function>|$)", re.S)
_MISTRAL_ARGS = re.compile(r"\[TOOL_CALLS\]\s*([\w.-]+)\s*\[ARGS\]\s*")
_SPACE = re.compile(r"\s*")
# JSON's pieces that matter for nesting: strings (and JavaScript template strings) whole.
_TOKENS = re.compile(r'"(?:\\.|[^"\\])*"|`[^`]*`|[{}\[\]]')
# The same with the separators between keys and values, to read an object still open.
_KEYED = re.compile(r'"(?:\\.|[^"\\])*"|`[^`]*`|[{}\[\]:,]')
_ESCAPE = re.compile(r"\\(.)", re.S)
_JSON_ESCAPES = frozenset('"\\/bfnrtu')
_ARG_KEYS = ("arguments", "parameters", "args", "input")
Calls = list[tuple[str, Any]]  # (tool name, arguments: a dict, or raw text)
# The most text a written call may follow and still be the reply ("I will check:"). Longer,
# the model is writing about the call (explaining, quoting), not making it.
LEAD_IN = 160
# What may follow the calls and still leave them the whole reply: the chat template's own
# tokens and a result the model imagined in its template's form (dropped).
_TEMPLATE_TAIL = re.compile(r"<tool_response>.*?(?:</tool_response>|$)|<\|[\w.-]{1,40}\|>", re.S)


@dataclass
class Found:
    calls: Calls
    end: int  # where the written call(s) end in the text


def _balanced(text: str, start: int) -> int | None:
    """The end of the JSON object or list opening at `start`, or None while it is open."""
    depth = 0
    for m in _TOKENS.finditer(text, start):
        piece = m.group()
        if piece in "{[":
            depth += 1
        elif piece in "}]":
            depth -= 1
            if depth == 0:
                return m.end()
    return None


@dataclass
class _Open:
    """A JSON object or list still open, as _written_names reads it."""

    call: bool  # a call's object, or a list of calls
    items: bool  # a list
    key: Any = None  # the object's key being read
    value: bool = False  # after the key's colon


def _written_names(text: str, pos: int) -> Iterator[str]:
    """The tool names the JSON opening at `pos` has already written, while it is still open:
    a call object's "name" (or "function" as a name), also inside a doubled brace, the wire
    shape's "function" object or a list of calls.

    A reply's first line `{"name": "count", ...` is then known to be no call of an offered
    tool long before the object closes, and the stream can show it as it comes."""
    stack: list[_Open] = []
    for m in _KEYED.finditer(text, pos):
        piece = m.group()
        top = stack[-1] if stack else None
        if piece in "{[":
            call = top is None or (
                top.call
                and piece == "{"
                and (
                    top.items  # a list of calls
                    or (top.key is None and not top.value)  # a doubled brace: {{"name": ...
                    or (top.key == "function" and top.value)  # the wire shape
                )
            )
            stack.append(_Open(call=bool(call), items=piece == "["))
        elif piece in "}]":
            stack.pop()
            if not stack:
                return  # closed: the caller reads it whole
            stack[-1].value = False
        elif top is None or top.items:
            continue  # a list's items and the commas between them
        elif piece == ":":
            top.value = True
        elif piece == ",":
            top.key, top.value = None, False
        elif not top.value:
            top.key = _loads(piece)
        else:
            name = _loads(piece)
            if top.call and top.key in ("name", "function") and isinstance(name, str):
                yield name
            top.value = False


def _names_other(text: str, pos: int, offered: Collection[str]) -> bool:
    """The JSON still open at `pos` names a tool that was not offered: it is no call."""
    return any(name not in offered for name in _written_names(text, pos))


def _backticks_as_strings(text: str) -> str:
    """JavaScript template strings (`...`, seen as a `code` value) as JSON strings."""
    return _TOKENS.sub(
        lambda m: json.dumps(m.group()[1:-1]) if m.group().startswith("`") else m.group(), text
    )


def _known_escapes(text: str) -> str:
    """Backslashes JSON has no escape for as the character they escape: a small model
    writes JavaScript's `\\'` into a string (`"console.log('Today\\'s list')"`)."""
    return _ESCAPE.sub(lambda m: m.group() if m.group(1) in _JSON_ESCAPES else m.group(1), text)


def _loads(text: str) -> Any:
    text = text.strip()
    template = _backticks_as_strings(text)
    # strict=False: a line break written inside a string (code, as the model wrote it).
    for attempt in (text, template, _known_escapes(template)):
        try:
            return json.loads(attempt, strict=False)
        except (ValueError, RecursionError):
            continue
    if text.startswith("{{") and text.endswith("}}"):  # doubled braces, as in a template
        return _loads(text[1:-1])
    return None


def _call(obj: Any, offered: Collection[str]) -> tuple[str, Any] | None:
    """(name, arguments) when `obj` is a call of an offered tool in one of the shapes."""
    if not isinstance(obj, dict):
        return None
    fn = obj.get("function")
    if isinstance(fn, dict):  # the OpenAI wire shape
        obj = fn
    name = obj.get("name")
    if not isinstance(name, str) and isinstance(fn, str):
        name = fn
    if not isinstance(name, str) or name not in offered:
        return None
    for key in _ARG_KEYS:
        if key in obj:
            args = obj[key]
            if isinstance(args, str):  # arguments as a JSON string, as on the wire
                parsed = _loads(args)
                args = parsed if isinstance(parsed, dict) else args
            return name, args
    # The arguments written beside the name ({"name": "memory", "action": "list"}).
    return name, {k: v for k, v in obj.items() if k not in ("name", "function", "type", "id")}


def _calls(value: Any, offered: Collection[str]) -> Calls | None:
    items = value if isinstance(value, list) else [value]
    calls = [_call(item, offered) for item in items]
    if not calls or any(c is None for c in calls):
        return None
    return [c for c in calls if c is not None]


def _series(text: str, pos: int, offered: Collection[str]) -> Found | int | None:
    """JSON calls from `pos` on, one after another (whitespace, `;` or `,` between):
    Found; the end of a closed JSON value that is no call; None while it is still open."""
    calls: Calls = []
    end = pos
    while True:
        pos = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if calls and pos < len(text) and text[pos] in ";,":
            pos = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
        if pos >= len(text) or text[pos] not in "{[":
            break
        if text[pos] == "[":  # calls come as a list of objects: "[1 2 3" is a plain answer
            inner = _SPACE.match(text, pos + 1).end()  # type: ignore[union-attr]
            if inner < len(text) and text[inner] not in "{[":
                return Found(calls, end) if calls else inner
        close = _balanced(text, pos)
        if close is None:
            if calls:
                return Found(calls, end)
            # Open, but its name already says it is no call: nothing to wait for.
            return len(text) if _names_other(text, pos, offered) else None
        value = _loads(text[pos:close])
        found = _calls(value, offered)
        if not found and value is None:
            found = _unreadable(text[pos:close], offered)
        if not found:
            return Found(calls, end) if calls else close
        calls += found
        pos = end = close
    return Found(calls, end) if calls else end


def _unreadable(body: str, offered: Collection[str]) -> Calls | None:
    """A call of an offered tool that is no JSON (`{"name": "code", "arguments": {"action":
    "execute": …}}`, the 0.5B model): the call, its arguments the text as written. It runs
    into the error a real call with such arguments gets, so the model can write it again;
    the person never reads it."""
    name = next(_written_names(body, 0), None)
    return [(name, body)] if name is not None and name in offered else None


def _closers(text: str) -> str:
    """The brackets that close what is still open at the end of `text` ("}]}")."""
    stack: list[str] = []
    for m in _TOKENS.finditer(text):
        piece = m.group()
        if piece in "{[":
            stack.append("}" if piece == "{" else "]")
        elif piece in "}]" and stack:
            stack.pop()
    return "".join(reversed(stack))


def _in(body: str, offered: Collection[str]) -> Calls | None:
    """The calls a closed block (a fence's or a tag's body) holds, all of it being calls."""
    found = _series(body, 0, offered)
    if isinstance(found, Found) and not body[found.end :].strip():
        return found.calls
    return None


def _tagged(text: str, pos: int, pattern: re.Pattern[str],
            one: Callable[[re.Match[str]], Calls | None],
            other: Callable[[re.Match[str]], bool]) -> Found | int | None:  # fmt: skip
    """Tagged calls one after another (`<tool_call>…</tool_call>`, `<function=…>…`); an
    unclosed last tag counts (a reply may end without it). `other`: an unclosed tag already
    names a tool not offered."""
    calls: Calls = []
    while (m := pattern.match(text, pos)) is not None:
        found = one(m)
        if not found:
            if calls:
                break
            if m.groups()[-1]:
                return m.end()
            return len(text) if other(m) else None
        calls += found
        pos = m.end()
        nxt = _SPACE.match(text, pos).end()  # type: ignore[union-attr]
        if not pattern.match(text, nxt):
            break
        pos = nxt
    return Found(calls, pos) if calls else None


def _function(m: re.Match[str], offered: Collection[str]) -> Calls | None:
    args = _loads(m.group(2))
    return [(m.group(1), args)] if m.group(1) in offered and isinstance(args, dict) else None


def _at(text: str, start: int, offered: Collection[str]) -> Found | int | None:
    """What begins at `start`: Found (written calls); the end of something that is no call;
    None while it is open (more text may make it a call)."""
    pos = start + len(text[start:]) - len(text[start:].lstrip(" \t"))
    if text.startswith("<tool_call>", pos):
        return _tagged(
            text, pos, _TAGGED, lambda m: _in(m.group(1), offered),
            lambda m: _names_other(text, _SPACE.match(text, m.start(1)).end(), offered),  # type: ignore[union-attr]
        )  # fmt: skip
    if text.startswith("<function=", pos):
        return _tagged(text, pos, _FUNCTION, lambda m: _function(m, offered),
                       lambda m: m.group(1) not in offered)  # fmt: skip
    if text.startswith("[TOOL_CALLS]", pos):
        m = _MISTRAL_ARGS.match(text, pos)
        if m is None:  # [TOOL_CALLS][{...}, ...]
            return _series(text, pos + len("[TOOL_CALLS]"), offered)
        close = _balanced(text, m.end()) if text.startswith("{", m.end()) else m.end()
        if close is None:
            return len(text) if m.group(1) not in offered else None
        args = _loads(text[m.end() : close])
        if m.group(1) not in offered or not isinstance(args, dict):
            return close
        return Found([(m.group(1), args)], close)  # [TOOL_CALLS]name[ARGS]{...}
    if text.startswith("<|python_tag|>", pos):
        return _series(text, pos + len("<|python_tag|>"), offered)
    if text.startswith("```", pos):
        fence = _FENCE.match(text, pos)
        if fence is None:
            return _open_fence(text, pos, offered)
        if fence.group(1).lower() not in _CALL_FENCES:
            return fence.end()
        calls = _in(fence.group(2), offered)
        return Found(calls, fence.end()) if calls else fence.end()
    return _series(text, pos, offered)


def _open_fence(text: str, pos: int, offered: Collection[str]) -> int | None:
    """A fence still open: len(text) once its language or the JSON in it shows it holds no
    call (a ```python block streams as it comes), else None (wait for more)."""
    head = _FENCE_HEAD.match(text, pos)
    if head is None:
        return None
    if head.group(1).lower() not in _CALL_FENCES:
        return len(text)
    body = _SPACE.match(text, head.end()).end()  # type: ignore[union-attr]
    if body == len(text):
        return None
    # An int: prose, JSON that is no call, or a call of a tool not offered.
    return len(text) if isinstance(_series(text, body, offered), int) else None


def _scan(
    text: str, offered: Collection[str], final: bool, about: list[tuple[int, Calls]] | None = None
) -> tuple[int, Found | None]:
    """(where, Found) for the first written calls; else (where the first candidate still
    open begins, None), or (len(text), None). `final`: the text is whole, nothing is open.
    `about` gets (where, calls) of the calls written with prose before and after them."""
    pos = 0
    while (opener := OPENER.search(text, pos)) is not None:
        # A call at a line's start may be indented: its match begins at that line's start.
        m = _START.search(text, max(pos, text.rfind("\n", 0, opener.start()) + 1))
        if m is None:
            break
        if len(text[: m.start()].strip()) > LEAD_IN:
            break  # too far in to be the reply: a call written here is quoted, not made
        what = _at(text, m.start(), offered)
        if (
            isinstance(what, Found)
            and text[: m.start()].strip()
            and _TEMPLATE_TAIL.sub("", text[what.end :]).strip()
        ):
            if about is not None:
                about.append((m.start(), what.calls))
            what = what.end  # prose before and after the calls: written about, not made
        if isinstance(what, Found):
            return m.start(), what
        if what is None and not final:
            return m.start(), None
        pos = what if isinstance(what, int) and what > m.start() else m.start() + 1
    # The text may end with the beginning of a marker or a fence (each begins with an opener).
    if not final and OPENER.search(text, max(pos, len(text) - _LONGEST_MARKER)):
        for marker in (*_MARKERS, "```"):
            for n in range(min(len(marker) - 1, len(text)), 0, -1):
                if len(text) - n >= pos and text.endswith(marker[:n]):
                    return len(text) - n, None
    return len(text), None


@dataclass
class Written:
    calls: list[LLMToolCall]
    before: str  # the reply's text before the first call


def find_written(
    text: str, offered: Collection[str], about: list[tuple[int, Calls]] | None = None
) -> Written | None:
    """The first written call(s) in `text` naming only offered tools, else None. `about`
    gets the calls written with prose before and after them (_scan)."""
    if not offered or not text:
        return None
    start, found = _scan(text, offered, final=True, about=about)
    if found is None:
        return None
    return Written(_as_calls(found.calls, offered), text[:start].strip())


def _as_calls(found: Calls, offered: Collection[str]) -> list[LLMToolCall]:
    calls = []
    for name, args in found:
        tool, action = offered[name] if isinstance(offered, Mapping) else (name, None)
        if action is not None and isinstance(args, dict) and not args.get("action"):
            args = {"action": action, **args}
        calls.append(
            LLMToolCall(
                id=f"call_{uuid.uuid4().hex[:16]}",
                name=tool,
                arguments=args if isinstance(args, str) else json.dumps(args, ensure_ascii=False),
            )
        )
    return calls


def adopt_written(completion: Completion, offered: Collection[str]) -> None:
    """A reply with no tool calls whose text is a written call of an offered tool becomes
    that call: its calls set, its text what came before them, `written` their number. One
    the output limit cut short is left out of the text (`cut_call`); calls written among
    words stay text and are named in `quoted`: near its start (within LEAD_IN), not made (a
    call the model quotes never runs), but meant when the model wrote them itself
    (bot/agent/runner.py asks it once more)."""
    if completion.tool_calls or not offered:
        return
    text = completion.content
    about: list[tuple[int, Calls]] = []
    found = find_written(text, offered, about)
    if found is None:
        start, _ = _scan(text, offered, final=False)
        if start < len(text):  # something still open at the end
            if completion.truncated:
                # Cut at the output limit while a call was being written: its half is no
                # answer (the user would read raw JSON), and the history must not teach it.
                completion.content = _FENCE_OPENED.sub("", text[:start]).strip()
                completion.cut_call = True
                return
            # The reply ended before its call's last brace (the 0.5B model: `{"name":
            # "code", "arguments": [...]` and stop): closed, it is the call it began.
            found = find_written(text + _closers(text[start:]), offered)
    if found is None:
        completion.quoted = _as_calls(about[0][1], offered) if about else []
        return
    completion.tool_calls = found.calls
    completion.content = found.before
    completion.written = len(found.calls)
    if completion.finish_reason in ("stop", None):
        completion.finish_reason = "tool_calls"


class Holdback:
    """An OnText for the streamed drafts that leaves out text that may be starting a written
    call of an offered tool (the call itself is never shown)."""

    def __init__(self, on_text: OnText, offered: Collection[str], shown: str = "") -> None:
        self.on_text = on_text
        self.offered = offered
        self.shown = shown  # what the stream showed before this holds it back

    async def __call__(self, text: str) -> None:
        about: list[tuple[int, Calls]] = []
        end = _scan(text, self.offered, final=False, about=about)[0]
        # A call written among words is held back too: the model may be asked again for it.
        visible = text[: min([end, *(a for a, _ in about)])]
        if visible != self.shown:
            self.shown = visible
            await self.on_text(visible)


Offered = dict[str, tuple[str, str | None]]  # a name a call may be written with: (tool, action)


def tool_names(schemas: list[dict[str, Any]]) -> Offered:
    """The names a written call may give, for the tools offered in a request (OpenAI
    function-tool schemas): each tool's own, and each value of a tool's `action` that no
    other offered tool has, meaning that tool with that action. The 0.5B model writes
    `{"name": "store", ...}` or `{"name": "execute", "arguments": {"code": ...}}`: the
    action as the tool (the "separate tools" form, memory_store, read back)."""
    names: Offered = {}
    actions: dict[str, list[str]] = {}
    for s in schemas:
        fn = s.get("function")
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        names[fn["name"]] = (fn["name"], None)
        action = ((fn.get("parameters") or {}).get("properties") or {}).get("action") or {}
        for value in action.get("enum") or ():
            if isinstance(value, str):
                actions.setdefault(value, []).append(fn["name"])
    for value, tools in actions.items():
        if len(tools) == 1 and value not in names:
            names[value] = (tools[0], value)
    return names
