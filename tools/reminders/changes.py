"""Word, inside this process, that a database's schedule changed (a reminder created,
paused, resumed or cancelled), so the alarm that fires reminders on their second looks
again at once instead of at its next minute tick.

The `schedule` tool and /reminders change jobs with only the session factory at hand (a
tool is built from ToolDeps, not from the running app), so listeners are keyed by it:
one database, one alarm. Changes made by another worker process reach this one at its
next minute tick at the latest (the alarm re-reads the schedule every minute)."""

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
