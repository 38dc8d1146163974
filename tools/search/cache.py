"""A small in-memory cache with a time limit, so repeated searches cost nothing."""

from __future__ import annotations

import time
from collections import OrderedDict
from collections.abc import Hashable
from typing import Generic, TypeVar

from tools.search.ratelimit import MonoClock

V = TypeVar("V")


class TTLCache(Generic[V]):
    """Least-recently-used entries go first once `size` is reached; entries expire after `ttl`."""

    def __init__(self, size: int = 256, ttl: float = 600.0, clock: MonoClock = time.monotonic):
        self.size = size
        self.ttl = ttl
        self.clock = clock
        self._items: OrderedDict[Hashable, tuple[float, V]] = OrderedDict()

    def get(self, key: Hashable) -> V | None:
        item = self._items.get(key)
        if item is None:
            return None
        stored, value = item
        if self.clock() - stored >= self.ttl:
            del self._items[key]
            return None
        self._items.move_to_end(key)
        return value

    def put(self, key: Hashable, value: V) -> None:
        self._items[key] = (self.clock(), value)
        self._items.move_to_end(key)
        while len(self._items) > self.size:
            self._items.popitem(last=False)

    def __len__(self) -> int:
        return len(self._items)
