"""The benches' command line: a few sizes and durations, each with a default, and --help
from the bench's own docstring (its first paragraph says what it measures)."""

from __future__ import annotations

import argparse


def options(doc: str | None, **defaults: int | float) -> argparse.Namespace:
    """`--some-name N` for each `some_name=default`, read as the default's type."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    for name, default in defaults.items():
        parser.add_argument("--" + name.replace("_", "-"), type=type(default), default=default)
    return parser.parse_args()
