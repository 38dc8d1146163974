"""Import aiogram without building all of its pydantic models up front.

aiogram's TelegramObject asks pydantic to defer each model's build (`defer_build=True`),
but `aiogram/types/__init__.py` then calls `model_rebuild(_types_namespace=...)` on all
~450 types at import: ~2 s and ~150 MB for models the bot mostly never meets. While
aiogram is imported here, that call only hands each class the namespace it needs
(`__pydantic_parent_namespace__`, which pydantic reads when it builds a deferred model on
first use), and every other aiogram model (the methods, `Response[...]`) gets the same
namespace, so a model built later resolves its forward references just as the eager
rebuild would. A self-check (a sample Update, a SendMessage, a Response[Message])
proves the lazy path works; on any failure, or when pydantic or aiogram look different
from what this expects, every type is rebuilt eagerly as aiogram itself would.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Callable, Iterator
from typing import Any

from pydantic import BaseModel

log = logging.getLogger(__name__)

# None until install() ran: "lazy", or "eager" (fallback, or aiogram was already imported).
mode: str | None = None
# The self-check's Response[Message]: pydantic holds parametrized models only weakly, and
# rebuilding it for the bot's own pinned set (dispatcher.py) would cost start-up time.
_kept: list[Any] = []

SAMPLE_UPDATE: dict[str, Any] = {
    "update_id": 1,
    "message": {
        "message_id": 1,
        "date": 1700000000,
        "chat": {"id": 1, "type": "private"},
        "from": {"id": 1, "is_bot": False, "first_name": "a"},
        "text": "hi",
        "entities": [{"type": "bold", "offset": 0, "length": 2}],
    },
}


def install(check: Callable[[], None] | None = None) -> str:
    """Imports aiogram, lazily if possible; returns the mode. Runs once per process.

    `check` replaces the self-check (tests use it to take the fallback path)."""
    global mode
    if mode is not None:
        return mode
    if "aiogram" in sys.modules or not _pydantic_fits():
        import aiogram  # noqa: F401  (already built, or we cannot help: aiogram's own way)

        mode = "eager"
        return mode
    namespace = _import_lazily()
    try:
        if namespace is None:
            raise RuntimeError("aiogram.types did not call model_rebuild with a namespace")
        for cls in _aiogram_models():
            cls.__pydantic_parent_namespace__ = namespace
        (check or self_check)()
        mode = "lazy"
    except Exception as exc:
        log.debug("lazy aiogram types unavailable (%r); rebuilding eagerly", exc)
        _rebuild_eagerly(namespace)
        mode = "eager"
    return mode


def self_check() -> None:
    """What the bot does first: parse an update with a message, build a call, parse a reply.

    Message is built first, as a model of its own: Update and Response[Message] then reuse
    its schema instead of each generating it (and the ~100 types it holds) again, and so
    does every later model that holds a Message (the dispatcher's pinned replies)."""
    from aiogram.methods import SendMessage
    from aiogram.methods.base import Response
    from aiogram.types import Message, Update

    message = Message.model_validate(SAMPLE_UPDATE["message"])
    update = Update.model_validate(SAMPLE_UPDATE)
    assert update.message == message and message.from_user is not None
    call = SendMessage(chat_id=1, text="x")
    _kept.append(Response[Message])
    reply = Response[Message].model_validate({"ok": True, "result": SAMPLE_UPDATE["message"]})
    assert call.text == "x" and reply.result is not None and reply.result.text == "hi"


def _pydantic_fits() -> bool:
    """The private pieces this relies on are there (pydantic 2.x as of 2.13)."""
    params = inspect.signature(BaseModel.model_rebuild).parameters
    return "_types_namespace" in params and hasattr(BaseModel, "__pydantic_parent_namespace__")


def _import_lazily() -> dict[str, Any] | None:
    """Imports aiogram with aiogram's bulk model_rebuild turned into a namespace hand-over;
    returns the namespace aiogram passed (None if it never did)."""
    original = BaseModel.__dict__["model_rebuild"]
    seen: list[dict[str, Any]] = []

    def lazy_rebuild(cls: type[BaseModel], /, **kwargs: Any) -> bool | None:
        namespace = kwargs.get("_types_namespace")
        if namespace is not None and cls.__module__.startswith("aiogram.") and len(kwargs) == 1:
            if not seen:
                seen.append(dict(namespace))
            cls.__pydantic_parent_namespace__ = seen[0]
            return None
        result: bool | None = original.__func__(cls, **kwargs)
        return result

    # The methods would each be built as their class is made:
    # deferred like the types, by their common base's config, before any method exists.
    init_subclass = BaseModel.__dict__["__pydantic_init_subclass__"]

    def defer_methods(cls: type[BaseModel], /, **kwargs: Any) -> None:
        if cls.__module__ == "aiogram.methods.base" and cls.__name__ == "TelegramMethod":
            cls.model_config["defer_build"] = True
        init_subclass.__func__(cls, **kwargs)

    BaseModel.model_rebuild = classmethod(lazy_rebuild)  # type: ignore[assignment,method-assign]
    BaseModel.__pydantic_init_subclass__ = classmethod(defer_methods)  # type: ignore[assignment,method-assign]
    try:
        import aiogram.methods  # noqa: F401  (aiogram, its types, then every method)
    finally:
        BaseModel.model_rebuild = original  # type: ignore[method-assign]
        BaseModel.__pydantic_init_subclass__ = init_subclass  # type: ignore[method-assign]
    return seen[0] if seen else None


def _aiogram_models() -> Iterator[type[BaseModel]]:
    stack: list[type[BaseModel]] = [BaseModel]
    seen: set[type[BaseModel]] = set()
    while stack:
        for sub in stack.pop().__subclasses__():
            if sub not in seen:
                seen.add(sub)
                stack.append(sub)
                if sub.__module__.startswith("aiogram."):
                    yield sub


def _rebuild_eagerly(namespace: dict[str, Any] | None) -> None:
    """What aiogram does at import: every type (and then every method) built now."""
    import aiogram.methods
    import aiogram.types

    if namespace is None:
        from typing import Literal, Optional, Union

        from aiogram.client.default import Default

        namespace = {"List": list, "Optional": Optional, "Union": Union, "Literal": Literal}
        namespace["Default"] = Default
        namespace.update({name: getattr(aiogram.types, name) for name in aiogram.types.__all__})
    for module in (aiogram.types, aiogram.methods):
        for name in module.__all__:
            cls = getattr(module, name)
            if isinstance(cls, type) and issubclass(cls, BaseModel):
                cls.model_rebuild(force=True, _types_namespace=namespace)
