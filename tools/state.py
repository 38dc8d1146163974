"""Typed keys of the waist: a Slot names a feature's per-request state (the RequestContext,
tools/base.py, holds each request's values), a Key one of its long-lived parts (the app holds
them, tools/feature.py Provide)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class Slot(Generic[T]):
    """A feature's typed per-request state (tools/hooks.py): declared once by the feature,
    made from `default` the first time a request reads it. The RequestContext holds no
    feature's field of its own."""

    def __init__(self, name: str, default: Callable[[], T]) -> None:
        self.name = name
        self.default = default

    def __repr__(self) -> str:
        return f"Slot({self.name!r})"


class Key(Generic[T]):
    """Names one long-lived part of type T (a meter, a job runner, the access list): a
    feature declares what builds it (`Provide`), and whoever needs it asks the host for it
    by this key, typed, never by searching the parts."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"Key({self.name!r})"
