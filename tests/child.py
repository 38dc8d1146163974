"""Children the tests start as a terminal would: Ctrl-C reaches them even when the test run
itself was started in the background (a shell's `make test &` ignores SIGINT, and an ignored
signal stays ignored in every child: Python then installs no KeyboardInterrupt at all)."""

from __future__ import annotations

import signal


def interruptible() -> None:
    """A `preexec_fn`: SIGINT back to its default, so the child's Python handles it."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
