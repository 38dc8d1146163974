"""Images to the model, and what to do when the model cannot take them.

`VisionGate` wraps the chat model (a ChatModel itself: the agent holds it). A request
carrying image parts that the provider rejects as such (a 4xx that talks about
images/vision/content) is sent again with the images replaced by a note, so the user still
gets an answer. In auto mode (bot/media/settings.py VISION_MODE) the refusal is remembered
(in memory and in DATA_DIR/vision.json, per model), and later photos are not sent at all.
Plain completions (summaries, code) and the context size pass through unchanged.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Awaitable, Callable, Coroutine
from functools import partial
from pathlib import Path
from typing import Any

from bot.errors import ProviderError
from tools.chat import ChatModel, Completion, ModelWrapper, OnText
from tools.state import Key

log = logging.getLogger(__name__)

NOT_SHOWN = "[image not shown: this model cannot read images]"
_REFUSAL = re.compile(r"image|vision|multi-?modal|modalit|content.{0,20}(type|part)", re.I)


def has_images(messages: list[dict[str, Any]]) -> bool:
    return any(
        isinstance(m.get("content"), list)
        and any(p.get("type") == "image_url" for p in m["content"])
        for m in messages
    )


def without_images(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for m in messages:
        content = m.get("content")
        if isinstance(content, list):
            texts = [p.get("text", "") for p in content if p.get("type") == "text"]
            if any(p.get("type") == "image_url" for p in content):
                texts.append(NOT_SHOWN)
            m = {**m, "content": "\n".join(t for t in texts if t)}
        out.append(m)
    return out


def remembered(state_file: Path | None, model: str) -> bool | None:
    """What auto mode learned of this model (None: not known yet)."""
    if state_file is None:
        return None
    try:
        value = json.loads(state_file.read_text()).get(model)
    except (OSError, ValueError, AttributeError):
        return None
    return value if isinstance(value, bool) else None


class VisionState:
    """Whether the model reads images: VISION_MODE, and in auto mode what it showed."""

    def __init__(self, mode: str, model: str, state_file: Path | None) -> None:
        self.mode = mode
        self.model = model
        self.state_file = state_file
        auto = remembered(state_file, model) if mode == "auto" else None
        self.supported: bool | None = True if mode == "on" else auto

    def enabled(self) -> bool:
        """Whether images should be sent to the model at all."""
        return self.mode == "on" or (self.mode == "auto" and self.supported is not False)

    def _remember(self, supported: bool) -> None:
        self.supported = supported
        log.info(
            "model %s %s images (remembered)",
            self.model,
            "reads" if supported else "does not read",
        )
        if self.state_file is None:
            return
        try:
            known = json.loads(self.state_file.read_text()) if self.state_file.exists() else {}
            if not isinstance(known, dict):
                known = {}
            known[self.model] = supported
            self.state_file.parent.mkdir(parents=True, exist_ok=True)
            self.state_file.write_text(json.dumps(known))
        except (OSError, ValueError):
            log.warning("could not save what the model supports to %s", self.state_file)


Messages = list[dict[str, Any]]
Stream = Callable[[Messages], Awaitable[Completion]]  # the request's stream, but its messages


class VisionGate(ModelWrapper):
    """The chat model, with a request's images taken out when the model refuses them; the
    completion then carries `dropped_note`, which the person reads under the answer."""

    parts_only = True

    def __init__(self, inner: ChatModel, state: VisionState, dropped_note: str) -> None:
        super().__init__(inner)
        self.state = state
        self.dropped_note = dropped_note

    def stream(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        on_text: OnText | None = None,
        *,
        model: str | None = None,
        on_wait: OnText | None = None,
    ) -> Coroutine[Any, Any, Completion]:
        # A request without images is the inner model's own call (tools/chat.py ModelWrapper).
        call = partial(
            self.inner.stream, tools=tools, on_text=on_text, model=model, on_wait=on_wait
        )
        return call(messages) if not has_images(messages) else self._with_images(messages, call)

    async def _with_images(self, messages: Messages, call: Stream) -> Completion:
        state = self.state
        try:
            out = await call(messages)
        except ProviderError as exc:
            status = exc.status or 0
            if not (400 <= status < 500 and status != 429 and _REFUSAL.search(str(exc))):
                raise
            log.warning("the model rejected an image (%s); answering without it", exc)
            if state.mode == "auto":
                state._remember(False)
            out = await call(without_images(messages))
            out.notes.append(self.dropped_note)
            return out
        if state.mode == "auto" and state.supported is None:
            state._remember(True)
        return out


VISION: Key[VisionState] = Key("media.vision")
