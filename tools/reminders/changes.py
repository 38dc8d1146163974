"""Word, inside this process, that a database's schedule changed, so the reminder alarm
looks again at once instead of at its next minute tick (another worker's changes wait for
that tick). Listeners are keyed by the session factory, the one thing the `schedule` tool
and /reminders have at hand: one database, one alarm."""

from __future__ import annotations

import weakref
from collections.abc import Callable

from db.engine import SessionFactory

Listener = Callable[[], None]

_listeners: weakref.WeakKeyDictionary[SessionFactory, set[Listener]] = weakref.WeakKeyDictionary()


def listen(sf: SessionFactory, listener: Listener) -> Callable[[], None]:
    """Call `listener` whenever the schedule in `sf`'s database changes; the unsubscribe."""
    _listeners.setdefault(sf, set()).add(listener)
    return lambda: _listeners.get(sf, set()).discard(listener)


def changed(sf: SessionFactory) -> None:
    for listener in list(_listeners.get(sf, ())):
        listener()
