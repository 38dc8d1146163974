"""Typed state of the waist: a Slot names a feature's per-request state (the RequestContext,
tools/base.py, holds each request's values), a Key one of its long-lived parts (the app holds
them, tools/feature.py Provide), and Kept holds what a feature read of a user's rows for a
while, so not every message reads it again."""

from __future__ import annotations

import time
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


class Kept(Generic[T]):
    """A value per user, read from the database and kept for `seconds`: what another process
    changes shows within that time; a change in this process drops it at once (`forget`)."""

    def __init__(self, seconds: float = 60.0, most: int = 10_000) -> None:
        self.seconds = seconds
        self.most = most
        self._kept: dict[int, tuple[float, T]] = {}

    def get(self, user_id: int) -> T | None:
        kept = self._kept.get(user_id)
        if kept is None or time.monotonic() - kept[0] >= self.seconds:
            return None
        return kept[1]

    def put(self, user_id: int, value: T) -> None:
        if len(self._kept) >= self.most:
            self._kept.clear()
        self._kept[user_id] = (time.monotonic(), value)

    def forget(self, user_id: int) -> None:
        self._kept.pop(user_id, None)
