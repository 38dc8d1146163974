"""`sidekick run` logs to DATA_DIR/sidekick.log (rotated, scrubbed) as well as stderr."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from bot.logs import ROTATE_KEEP, setup_logging


@pytest.fixture
def restore_root() -> Iterator[None]:
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    for h in root.handlers:
        if h not in handlers:
            h.close()
    root.handlers[:], root.level = handlers, level


def test_rotating_log_file_keeps_lines_scrubbed_and_rotates(
    tmp_path: Path, restore_root: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("bot.logs.ROTATE_BYTES", 2000)
    log = tmp_path / "sidekick.log"
    setup_logging("INFO", ["sk-supersecret"], rotating=log)
    for i in range(200):
        logging.getLogger("t").info("line %d with sk-supersecret", i)
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files[0] == "sidekick.log" and len(files) == 1 + ROTATE_KEEP
    text = log.read_text()
    assert "line 199 with [secret]" in text and "sk-supersecret" not in text
