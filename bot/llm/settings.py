"""Model settings: the endpoint and model(s) (LLM_BASE_URL, LLM_API_KEY, LLM_MODEL: the
default first, then what /model offers too), the fallback model, and the bounds of one call
(time, output tokens, the context the model holds). A slice below bot/config.py, so the
features that talk to the LLM endpoint (doctor lines, /model, history budget) read it
without importing the config."""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    Field,
    ModelWrapValidatorHandler,
    PrivateAttr,
    SecretStr,
    model_validator,
)


def split_models(value: str) -> list[str]:
    """`a, b, c` as its names, in order, each once."""
    return list(dict.fromkeys(p for p in (x.strip() for x in value.split(",")) if p))


def http_url(value: str) -> str:
    """An endpoint's URL: http(s), without its trailing slash."""
    if not re.match(r"^https?://", value):
        raise ValueError("must start with http:// or https://")
    return value.rstrip("/")


HttpUrl = Annotated[str, AfterValidator(http_url)]
# A blank value is unset.
Blank = BeforeValidator(lambda v: (v.strip() or None) if isinstance(v, str) else v)


class ModelSettings(BaseModel):
    llm_base_url: HttpUrl = "https://api.openai.com/v1"
    llm_api_key: SecretStr | None = None
    # The model; several, comma-separated: the first is everyone's default, the others are
    # what a user may pick with /model too (LLM_MODELS was that list on its own). The field
    # holds the first; llm_models the others.
    llm_model: str = ""
    # Seconds one whole call may take, its retries included: a chat message waits out an
    # outage (5xx, 429, network, stalls) this long. A try silent for a fifth of it (at least
    # a minute) counts as stalled. Raise it for a slow local model.
    llm_timeout_s: float = Field(default=600.0, gt=0)
    # Used when the primary model still fails after its retries (429, 5xx, timeouts).
    llm_fallback_model: Annotated[str | None, Blank] = None
    llm_fallback_base_url: Annotated[HttpUrl | None, Blank] = None  # default: LLM_BASE_URL
    llm_fallback_api_key: SecretStr | None = None  # default: LLM_API_KEY
    # The max_tokens of every call, and the ceiling of what a caller asks for: a degenerate
    # stream (a small model repeating a newline until its context fills) stops there. The
    # default leaves the code generator's own ask whole.
    llm_max_output_tokens: int = Field(default=4096, ge=1)
    # The model's context in tokens; 0: ask the server (llama.cpp, Ollama) or unknown.
    llm_context_tokens: int = Field(default=0, ge=0)
    # Replies held by the server to "an answer or a call of one offered tool with valid
    # arguments" (bot/llm/constrained.py): auto where the server is llama.cpp's or Ollama's.
    # Auto by default: held, small models answer right more often (bench/tool_use.py), at
    # the price of one round of successful calls per message; so auto holds only a small
    # model (tools/chat.py SMALL_MODEL), a bigger one keeps its native calls.
    llm_constrained_calls: Literal["auto", "on", "off"] = "auto"

    _more_models: tuple[str, ...] = PrivateAttr(default=())

    @model_validator(mode="wrap")
    @classmethod
    def _split_models(cls, data: Any, handler: ModelWrapValidatorHandler[Any]) -> Any:
        more: list[str] = []
        if isinstance(data, dict) and isinstance(data.get("llm_model"), str):
            first, *more = split_models(data["llm_model"]) or [""]
            data = {**data, "llm_model": first}
        model = handler(data)
        if isinstance(model, ModelSettings):
            model._more_models = tuple(more)
        return model

    @property
    def llm_models(self) -> tuple[str, ...]:
        """The models after the first in LLM_MODEL: what /model offers besides the default."""
        return self._more_models
