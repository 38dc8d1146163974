"""The data folder's lock (bot/ops/runlock.py): one bot alone, webhook workers together, a
restore alone, and `sidekick status` reading who holds it without taking it from anyone."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.ops.runlock import Busy, hold, holder

NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def test_a_second_holder_is_refused_naming_the_first(tmp_path: Path) -> None:
    assert holder(tmp_path) is None
    with hold(tmp_path, NOW, "run"):
        found = holder(tmp_path)
        assert found is not None and found.pid == os.getpid() and found.since == NOW
        with pytest.raises(Busy, match=f"pid {os.getpid()}.*already uses the data folder"):
            with hold(tmp_path, NOW, "run"):
                pass
        with pytest.raises(Busy), hold(tmp_path, NOW, "restore"):
            pass
        assert holder(tmp_path) is not None  # the refused attempts took nothing away
    assert holder(tmp_path) is None


def test_webhook_workers_share_and_a_restore_waits_for_all(tmp_path: Path) -> None:
    with hold(tmp_path, NOW, "run", shared=True), hold(tmp_path, NOW, "run", shared=True):
        assert holder(tmp_path) is not None
        with pytest.raises(Busy), hold(tmp_path, NOW, "restore"):
            pass
    with hold(tmp_path, NOW, "restore"):
        found = holder(tmp_path)
        assert found is not None and found.command == "restore"
        with (
            pytest.raises(Busy, match="`sidekick restore`"),
            hold(tmp_path, NOW, "run", shared=True),
        ):
            pass
