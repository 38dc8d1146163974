"""Sidekick: a self-hosted personal assistant that lives in Telegram."""

import sys

# httpx imports its command-line client (click, pygments: ~2 MB, ~25 ms at start-up) when
# those happen to be installed; nothing here runs it. A None entry makes that one import
# fail, which httpx expects: its `main` becomes a stub saying the CLI is not installed.
sys.modules.setdefault("httpx._main", None)  # type: ignore[arg-type]
