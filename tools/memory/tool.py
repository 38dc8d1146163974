"""The `memory` tool: store, recall, list and forget what matters about the user.

A memory about the user comes from the user's own words: what the model stores must be
supported by the person's messages in this session (every name, number, date, link and
quote, and most of its words), else the call fails saying so. In a turn that has read outside
content (a web page, search results, a file: RequestContext.outside), what the model stores
is kept as what that source said (a short `sourced` memory, marked as outside content),
never as the user's fact, preference or instruction, unless the user allowed this very
store when asked (the approval gate asks before it in such a turn). In a group, only what
the user said in that group is looked up: every member reads the answer, and the rest is
private.

A new fact that corrects or contradicts a remembered one names it (`replaces`): the old one
stays as its history, shown with it, and leaves recall. "Forget that" and "that is wrong"
point at the memory the last answer used: `forget` without an id, `replaces: "last"`."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import BaseModel, Field, model_validator
from pydantic.json_schema import SkipJsonSchema, WithJsonSchema

from db.engine import SessionFactory
from db.repos import core as core_repo
from tools.asked import asked
from tools.base import (
    Tool,
    ToolCall,
    ToolDeps,
    ToolError,
    ToolModule,
    ToolOutput,
    Unavailable,
    plain_brief,
)
from tools.effects import OUTSIDE_MARK, SEEN, effects, outside_note
from tools.grounding import Source, check, checks_names, in_their_words
from tools.memory.store import MEMORY, MemoryHit, MemoryStore

CATEGORIES = {
    "long": ("fact", "preference", "relationship"),
    "mid": ("goal", "plan", "project"),
}

DESCRIPTION = (
    'Facts about the user. store: one per call, third person ("Lives in Berlin"), `layer` long '
    "(facts, people), mid (goals, plans), short or session; `replaces`: the id it corrects "
    '("last": your last answer\'s). recall by `query`; list; forget `memory_id`.'
)

# Words a message that asks to forget, or says a memory is wrong, uses (English-centred, as
# tools/reminders/asked.py): the 1.5B model, asked "How many days are there from
# 2026-01-01 to 2026-12-25?", recalled and then forgot #2 (bench/tool_use.py, 2026-12-06).
FORGETTING = re.compile(
    r"\bforget|\bforgot|\bdelete|\bremove|\berase|\bwrong\b|\bnot true\b|\bincorrect"
    r"|\bno longer\b|\bnot anymore\b|\boutdated|\bclear\b|\bwipe"
    r"|esque[cç]|olvid|vergiss|oubli|dimentic|vergeet|забуд|удали",
    re.I,
)
NOT_ASKED = (
    "Not forgotten: the user did not ask to forget or correct anything in this message. "
    "Answer what they asked; to forget a memory, ask them first."
)
# A template's slot ("[sister's name]", "<fact>", "{name}"): every word of it may be the
# person's, but it says nothing (the 0.5B model stored "my sister's name is [sister's name]").
_SLOT = re.compile(r"\[[^\[\]\n]{1,60}\]|<[^<>\n]{1,60}>|\{[^{}\n]{1,60}\}")
SOURCED = "sourced"  # the category of what outside content said, kept as such
SOURCED_LAYER = "short"  # recent context that expires, not a standing fact about the user
SOURCE_CHARS = 200
PRIVATE = (
    "Nothing the user said in this group matches. Only that is looked up here: this is a group "
    "chat, and the rest of the user's memories are private (every member would read them). "
    "They can ask me in a private chat."
)
UNKNOWN_LAST = (
    "Your last answer used no memory I can point at: give `memory_id` (recall or list show ids)."
)

_READS = effects(reads=("memory",))
MEMORY_EFFECTS = {"recall": _READS, "list": _READS, "store": effects(writes=("memory",)),
                  "forget": effects(writes=("memory",), deletes=True)}  # fmt: skip


# The fields each action reads.
ACTION_FIELDS = {
    "store": ("layer", "content", "category", "certainty", "replaces"),
    "recall": ("query", "layer", "limit"),
    "list": ("layer", "limit"),
    "forget": ("memory_id",),
}


class MemoryParams(BaseModel):
    action: Literal["store", "recall", "list", "forget"]
    layer: Literal["long", "mid", "short", "session"] | None = None
    content: str | None = Field(None, description="store: the fact")
    category: str | None = Field(None, description="fact, preference, relationship, goal, plan")
    # Knobs a model seldom turns: validated, not shown (their tokens are in every prompt).
    certainty: SkipJsonSchema[float] = Field(1.0, ge=0.0, le=1.0)
    query: str | None = None
    limit: SkipJsonSchema[int] = Field(10, ge=1, le=50)
    memory_id: int | None = None
    # Shown as one string type (an id or "last"): the union's schema costs every prompt ~20
    # tokens; validation still takes an int or "last" ("12" becomes 12).
    replaces: Annotated[int | Literal["last"] | None, WithJsonSchema({"type": "string"})] = None

    @model_validator(mode="before")
    @classmethod
    def _infer_action(cls, data: Any) -> Any:
        """Small models leave out `action` (and write a recall's query as `content`): where
        the other fields say which one is meant, it is that one. Never `forget`: a call
        deletes only when it names the action (the 1.5B model asked "What am I allergic
        to?" wrote `content` and `memory_id` without one, and the allergy was deleted). A
        call with an id and no action is unclear, and its error says so."""
        if not isinstance(data, dict):
            return data
        data = dict(data)
        if not data.get("action"):
            if data.get("content"):
                data["action"] = "store"  # an id beside it is dropped: a store reads none
            elif data.get("query"):
                data["action"] = "recall"
            # An id alone: forget, or a recall with an id copied in: not guessed.
        if data.get("action") == "recall" and not data.get("query") and data.get("content"):
            data["query"] = data.pop("content")
        # A small model fills in every field of the schema ({"action": "store", ...,
        # "memory_id": "ana"}): fields its action does not read are left out, so a garbled
        # one does not fail the call.
        if (read := ACTION_FIELDS.get(str(data.get("action")))) is not None:
            data = {k: v for k, v in data.items() if k == "action" or k in read}
        return data


def build(deps: ToolDeps) -> Tool[MemoryParams]:
    store = deps.maybe(MEMORY)
    if store is None:
        raise Unavailable("no memory store (check EMBEDDINGS)")

    async def run(p: MemoryParams, call: ToolCall) -> Any:
        ctx = call.ctx
        if p.action == "store":
            return await _store(store, deps.session_factory, p, call)
        if p.action == "recall":
            if not (p.query or "").strip():
                raise ToolError("recall needs a non-empty `query`")
            layers = [p.layer] if p.layer else None
            hits = await store.recall(
                user_id=ctx.user_id,
                query=p.query or "",
                layers=layers,
                limit=p.limit,
                session_id=ctx.session_id,
                group=ctx.chat,
            )
            if not hits:
                return PRIVATE if ctx.shared_chat else "No matching memories."
            return {"memories": await _with_history(store, ctx.user_id, hits, ctx.chat)}
        if p.action == "list":
            page = await store.page(
                user_id=ctx.user_id, layer=p.layer, limit=p.limit, group=ctx.chat
            )
            items = [h.to_dict() for h in page.items]
            if not items:
                return PRIVATE if ctx.shared_chat else "No memories yet."
            return {"total": page.total, "memories": items}
        if not await asked(deps.session_factory, ctx, FORGETTING):
            raise ToolError(NOT_ASKED)
        memory_id = p.memory_id
        if memory_id is None:
            used = await _last_used(store, call)
            if used is None:
                raise ToolError(UNKNOWN_LAST)
            memory_id = used.id
        if not await store.forget(user_id=ctx.user_id, memory_id=memory_id):
            raise ToolError(f"no memory #{memory_id} (it does not exist or is not this user's)")
        return f"forgot #{memory_id}"

    return Tool(
        name="memory",
        description=DESCRIPTION,
        params=MemoryParams,
        run=run,
        effects=lambda p: MEMORY_EFFECTS[p.action],
        brief=found,
    )


async def _last_used(store: MemoryStore, call: ToolCall) -> MemoryHit | None:
    ctx = call.ctx
    if ctx.trigger_message_id is None:
        return None
    return await store.last_used(
        user_id=ctx.user_id, session_id=ctx.session_id, before_message_id=ctx.trigger_message_id
    )


async def _with_history(
    store: MemoryStore, user_id: int, hits: list[MemoryHit], group: int | None
) -> list[dict[str, Any]]:
    """The hits as the model reads them, each with what it replaced ("before"), so it can
    say what changed and when; in a group only what was said there."""
    formers = await store.history(user_id=user_id, ids=[h.id for h in hits], group=group)
    out = []
    for h in hits:
        item = h.to_dict()
        if h.id in formers:
            item["before"] = [f.line() for f in formers[h.id]]
        out.append(item)
    return out


def found(output: ToolOutput) -> str | None:
    """The memories a recall found by their words, or a store's line ("stored #3")."""
    if isinstance(output, dict) and isinstance(output.get("memories"), list):
        return plain_brief("; ".join(str(m.get("content")) for m in output["memories"][:3]))
    return plain_brief(output)


async def _store(store: MemoryStore, sf: SessionFactory, p: MemoryParams, call: ToolCall) -> str:
    content = (p.content or "").strip()
    if not content:
        raise ToolError("store needs non-empty `content`")
    category = (p.category or "").strip().lower() or None
    # Small models often name the category and leave out the layer it implies.
    layer: str | None = p.layer or next((k for k, v in CATEGORIES.items() if category in v), None)
    if layer is None:
        raise ToolError("store needs `layer`: long, mid, short or session")
    if len(content) > 2000:
        raise ToolError("content is too long (max 2000 characters): store one fact per call")
    allowed = CATEGORIES.get(layer)
    dropped = ""
    if category and not any(category in c for c in CATEGORIES.values()) and allowed:
        # A label no layer knows ("system", copied from the new-session rule): the fact is
        # what the user asked to keep, so it is stored without it.
        dropped, category = (
            f" (category {category!r} left out: {layer} takes " + (", ".join(allowed) + ")"),
            None,
        )
    if allowed and category and category not in allowed:
        raise ToolError(
            f"category {category!r} does not fit layer {layer}; use one of: " + ", ".join(allowed)
        )
    if category and len(category) > 40:
        raise ToolError("category is too long (max 40 characters)")
    seen = call.ctx.state(SEEN)
    if seen.sources and call.call_id not in seen.confirmed:
        return await _store_sourced(store, content, call)
    if (unsaid := await _not_theirs(sf, content, call)) is not None:
        raise ToolError(unsaid)
    replaces = p.replaces
    if replaces == "last":
        # Nothing the last answer used: a new fact (a small model fills in every field).
        used = await _last_used(store, call)
        replaces = used.id if used is not None else None
    result = await store.store(
        user_id=call.ctx.user_id,
        layer=layer,
        content=content,
        category=category,
        certainty=p.certainty,
        session_id=call.ctx.session_id,
        message_id=call.ctx.trigger_message_id,
        replaces=replaces,
    )
    said = f"updated #{result.id}" if result.updated else f"stored #{result.id}"
    if result.replaced is not None:
        said += f" (replaces #{result.replaced}, kept as its history)"
    elif replaces is not None:
        said += f" (#{replaces} not replaced: no such memory of this user's)"
    for mid, older in result.rivals:
        said += (
            f". It may contradict #{mid} ({older!r}): if it replaces that one, store it again "
            f"with replaces={mid}"
        )
    return said + dropped


async def _not_theirs(sf: SessionFactory, content: str, call: ToolCall) -> str | None:
    """Why `content` is not what the person said in this session's messages (their own
    words: what they forwarded is outside content), or None. Every name, number, date,
    link and quote in it must be theirs, and most of its words (tools/grounding.py): the
    1.5B model stored "My sister is a 20-year-old artist living in Paris" from its own
    earlier answers, and recalled it in the next session as a fact."""
    async with sf() as s:
        rows = await core_repo.session_messages(s, call.ctx.session_id)
    theirs = [m.content.partition(OUTSIDE_MARK)[0] for m in rows if m.role == "user"]
    words = "\n".join(theirs)
    for slot in _SLOT.finditer(content):
        if slot.group() not in words:
            return (
                f"Not stored: {slot.group()!r} is a slot left to fill in, not what the user "
                "said. Store the fact itself, in their words; if they did not say it, store "
                "nothing."
            )
    grounded = check(content, Source(words), names=checks_names(words))
    if grounded.ok and in_their_words(content, theirs):
        return None
    why = grounded.reason() or "most of its words are not the user's"
    return (
        f"Not stored: the user did not say this ({why}). A memory about the user comes "
        "from their own messages: store what they told you, in their words, or ask them."
    )


async def _store_sourced(store: MemoryStore, content: str, call: ToolCall) -> str:
    """What a turn that read outside content asks to remember, kept as that content's."""
    ctx = call.ctx
    source = ", ".join(ctx.state(SEEN).sources)
    if len(source) > SOURCE_CHARS:
        source = source[: SOURCE_CHARS - 1] + "…"
    result = await store.store(
        user_id=ctx.user_id,
        layer=SOURCED_LAYER,
        content=outside_note(source) + content,
        category=SOURCED,
        certainty=0.5,
        session_id=ctx.session_id,
        message_id=ctx.trigger_message_id,
    )
    return (
        f"stored #{result.id} as what {source} said, not as the user's: this turn read "
        "outside content, and a fact, preference or instruction of the user's comes from "
        "their own words. If the user said it, ask them to tell you again."
    )


TOOL = ToolModule(
    name="memory",
    build=build,
    prompt="memory: remember what matters about the user (facts, preferences, goals) and "
    "recall it.",
)
