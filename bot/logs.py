"""Logging setup with a filter that scrubs every secret out of every line."""

from __future__ import annotations

import logging
import logging.handlers
import re
import sys
from pathlib import Path

_TOKEN_RE = re.compile(r"(?<!\d)\d{6,12}:[A-Za-z0-9_-]{30,}")  # Telegram bot tokens in URLs


class Scrubber(logging.Filter):
    def __init__(self, secrets: list[str]) -> None:
        super().__init__()
        self.secrets = sorted({s for s in secrets if len(s) >= 4}, key=len, reverse=True)

    def scrub(self, text: str) -> str:
        for secret in self.secrets:
            text = text.replace(secret, "[secret]")
        return _TOKEN_RE.sub("[secret]", text)

    def filter(self, record: logging.LogRecord) -> bool:
        record.msg = self.scrub(record.getMessage())
        record.args = None
        if record.exc_info:
            # Format the traceback now so the scrubbed text is what handlers print.
            record.exc_text = self.scrub(logging.Formatter().formatException(record.exc_info))
            record.exc_info = None
        return True


# The bot's own log file: a few rotated files, so a bot left running for months cannot fill
# the disk, yet the last days are there after a crash (stderr may be gone with its terminal).
RUN_LOG = "sidekick.log"  # in DATA_DIR, rotated (`sidekick run`; `sidekick logs` reads it)
ROTATE_BYTES = 5_000_000
ROTATE_KEEP = 3


def setup_logging(
    level: str, secrets: list[str], file: Path | None = None, rotating: Path | None = None
) -> None:
    """Log lines to stderr, or with `file` to that file and only errors to stderr (the
    terminal chat keeps its screen for the conversation). With `rotating`, every line also
    goes to that file, rotated."""
    fmt = logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s")
    scrubber = Scrubber(secrets)
    console = logging.StreamHandler(sys.stderr)
    handlers: list[logging.Handler] = [console]
    if file is not None:
        console.setLevel(logging.ERROR)
        handlers.append(logging.FileHandler(file, encoding="utf-8"))
    if rotating is not None:
        handlers.append(
            logging.handlers.RotatingFileHandler(
                rotating, maxBytes=ROTATE_BYTES, backupCount=ROTATE_KEEP, encoding="utf-8"
            )
        )
    for handler in handlers:
        handler.setFormatter(fmt)
        handler.addFilter(scrubber)
    root = logging.getLogger()
    root.handlers[:] = handlers
    root.setLevel(level.upper())
    noisy = ("httpx", "httpx2", "httpcore", "httpcore2", "aiogram.event", "apscheduler", "alembic")
    for name in noisy:
        logging.getLogger(name).setLevel(logging.WARNING)
