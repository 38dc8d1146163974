"""The waist's model types: what one model call gives back (Completion), the chat model's
protocol (ChatModel, written once), and `ModelWrapper`, the base every model wrapper a
feature declares (tools/feature.py `wraps`: metering, the vision gate) derives from, so a
wrapper passes on every member it does not change and cannot drift from the protocol.

bot/llm/ reads completions off the wire (bot/llm/completion.py) and is the one ChatModel
that talks to a server (bot/llm/client.py)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field
from typing import Any, ClassVar, Protocol

from tools.model_call import ModelCall
from tools.state import Key

OnText = Callable[[str], Awaitable[None]]

CUT_NOTE = "\n\n(The reply was cut at the output limit, LLM_MAX_OUTPUT_TOKENS.)"
CUT_CALL_NOTE = (
    "\n\n(The model was writing out a tool call when it reached the output limit, "
    "LLM_MAX_OUTPUT_TOKENS: the call did not run.)"
)


@dataclass
class LLMToolCall:
    id: str
    name: str
    arguments: str  # raw JSON text, as the model wrote it

    @classmethod
    def of(cls, wire: dict[str, Any]) -> LLMToolCall:
        """A call as the wire (and our records) carry it."""
        return cls(wire["id"], wire["function"]["name"], wire["function"]["arguments"])


@dataclass
class Usage:
    """Token counts of one call, as the provider reported them (or estimated by us)."""

    prompt_tokens: int = 0
    completion_tokens: int = 0
    cached_tokens: int = 0  # of prompt_tokens, read from the provider's cache
    reasoning_tokens: int = 0
    estimated: bool = False


@dataclass
class Completion:
    content: str = ""
    tool_calls: list[LLMToolCall] = field(default_factory=list)
    finish_reason: str | None = None
    usage: Usage | None = None  # None: the provider sent none
    model: str = ""  # the model that answered (the fallback's name when it did)
    provider_id: str | None = None  # the provider's completion id
    # Set when the fallback model answered: why the requested model did not.
    fallback_from: str | None = None
    fallback_reason: str | None = None
    reasoning: str = ""  # the model's thinking, never shown as the answer
    reasoning_field: str = ""  # the wire name it came under, to send it back under
    # How many of tool_calls the model wrote out as text (adopt_written), not sent.
    written: int = 0
    # The output limit cut a written call of an offered tool short: left out of content.
    cut_call: bool = False
    # Calls of offered tools the reply wrote among its words: not run, as text is not.
    quoted: list[LLMToolCall] = field(default_factory=list)
    # Lines the person reads under the answer about this call (a wrapper's: the image was
    # not shown), each once.
    notes: list[str] = field(default_factory=list)

    @property
    def truncated(self) -> bool:
        """The reply stopped at the output limit (max_tokens), not where the model ended it
        (Mistral says `model_length` when the context ran out first)."""
        return self.finish_reason in ("length", "model_length")

    @property
    def cut_note(self) -> str:
        """The line that tells the user the reply was cut; empty when it was not."""
        if not self.truncated:
            return ""
        return CUT_CALL_NOTE if self.cut_call else CUT_NOTE

    def turn_fields(self) -> dict[str, str]:
        """What the assistant turn carrying this completion's tool calls sends back besides
        content and tool_calls: the reasoning, under the provider's own name."""
        return {self.reasoning_field: self.reasoning} if self.reasoning_field else {}


# A tool entry's stricter schema of the arguments it accepts (tools/base.py Tool.held), for
# a reply the server holds to a grammar: the model client takes it out before the request
# goes, and what counts a request's tokens leaves it out (the model never reads it).
HELD = "held_parameters"


def shown_tools(tools: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The tool entries as the model reads them: without HELD."""
    out = []
    for tool in tools:
        fn = tool.get("function")
        if isinstance(fn, dict) and HELD in fn:
            tool = {**tool, "function": {k: v for k, v in fn.items() if k != HELD}}
        out.append(tool)
    return out


# Below this many parameters a model is a small one (where the server says its size): its
# tool replies are held to a schema by default (bot/llm/constrained.py), and what it reads
# into the person's words is confirmed with them (tools/reminders/asked.py). The 0.5B and
# 1.5B models this was measured with, and the 3B ones beside them.
SMALL_MODEL = 4_000_000_000


class ChatModel(Protocol):
    async def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Completion:
        """One streamed chat completion, with tools (`model`: default LLM_MODEL); `on_text`
        gets the whole text so far after each delta. `on_wait`: someone waits for this
        answer, so an outage is waited out, and it gets the line to tell them."""
        ...

    async def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Completion:
        """One plain completion with its usage. `call` says for whom and why, so a metering
        wrapper can check the budget first (BudgetExceeded) and record the usage."""
        ...

    async def complete_text(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        call: ModelCall | None = None,
    ) -> str:
        """The text of `complete`: what summaries and tools need (a ChatModel is a
        TextModel, tools/base.py). Written once here: a class deriving from ChatModel (the
        client, ModelWrapper) inherits it."""
        return (await self.complete(messages, max_tokens, call=call)).content

    async def context_tokens(self, model: str | None = None) -> int | None:
        """How many tokens `model`'s context holds (default LLM_MODEL): LLM_CONTEXT_TOKENS,
        else what the server says (llama.cpp, Ollama), else None (unknown)."""
        ...

    async def parameters(self, model: str | None = None) -> int | None:
        """`model`'s size in parameters where the server says (llama.cpp, Ollama), else
        None: a feature may trust a small model's reading of the person less."""
        ...


class Metering(Protocol):
    """What a part that reaches the model by itself needs of metering (the code tool's
    relay, whose OpenCode jobs talk to the endpoint directly): the budget check before each
    call, the user's /model pick, and the usage row after the call. The usage feature
    provides it as METERING; without that feature nothing is metered."""

    async def refusal(self, user_id: int | None) -> str | None:
        """One sentence when a budget or cap is used up (no call may be made), else None."""
        ...

    async def chosen_model(self, user_id: int) -> str | None:
        """The model the user picked with /model (one the bot offers); None: the default."""
        ...

    async def record_call(
        self,
        call: ModelCall,
        out: Completion,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
    ) -> None:
        """The call's usage row, in a transaction of its own; the totals count it."""
        ...


METERING: Key[Metering] = Key("model.metering")


class ModelWrapper(ChatModel):
    """A ChatModel around another: every member passes on to `inner` unless overridden."""

    # The wrapper acts on a request's content parts (images) alone: a request without any
    # streams past it (text_model).
    parts_only: ClassVar[bool] = False

    def __init__(self, inner: ChatModel) -> None:
        self.inner = inner

    # A member passed on is a plain function handing back the inner model's own coroutine:
    # the caller awaits that directly, so no frame of a wrapper that changes nothing sits
    # between the loop and the client at every call (nor in the reader's way).
    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Coroutine[Any, Any, Completion]:
        return self.inner.stream(messages, tools, on_text, model=model, on_wait=on_wait)

    def complete(
        self,
        messages: list[dict[str, Any]],
        max_tokens: int | None = None,
        *,
        model: str | None = None,
        call: ModelCall | None = None,
    ) -> Coroutine[Any, Any, Completion]:
        return self.inner.complete(messages, max_tokens, model=model, call=call)

    def context_tokens(self, model: str | None = None) -> Coroutine[Any, Any, int | None]:
        return self.inner.context_tokens(model)

    def parameters(self, model: str | None = None) -> Coroutine[Any, Any, int | None]:
        return self.inner.parameters(model)


def text_model(model: ChatModel) -> ChatModel:
    """The model whose `stream` a request without content parts (images) calls: past every
    wrapper that passes a stream on unchanged or acts on parts alone, so such a request
    enters none of them on each call. Resolved once per model."""
    while isinstance(model, ModelWrapper) and (
        model.parts_only or type(model).stream is ModelWrapper.stream
    ):
        model = model.inner
    return model
