"""Changing a .env as a person would: other lines stay, a changed setting keeps its place,
a new one goes last, and the file is its owner's only (it holds the token)."""

from __future__ import annotations

import os
import re
from pathlib import Path

from dotenv import dotenv_values

_LINE = re.compile(r"^\s*(?:export\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*=(.*)$")


def read_env(path: Path) -> dict[str, str]:
    # Read as pydantic-settings reads it (python-dotenv): the last line of a name wins.
    values = dotenv_values(path) if path.is_file() else {}
    return {k.upper(): v for k, v in values.items() if v is not None}


def _quoted(value: str) -> str:
    return f'"{value}"' if re.search(r"[\s#'\"]", value) else value


def set_values(path: Path, values: dict[str, str | None]) -> None:
    """Set (None: remove) these names, keeping everything else; written to a temporary file
    and renamed over, mode 600."""
    lines = path.read_text(encoding="utf-8").splitlines() if path.is_file() else []
    todo = dict(values)
    out: list[str] = []
    for line in lines:
        m = _LINE.match(line)
        name = m.group(1).upper() if m else None
        if name is None or name not in values:
            out.append(line)
        elif name in todo:  # the first line of that name takes the value, others go
            value = todo.pop(name)
            if value is not None:
                out.append(f"{name}={_quoted(value)}")
    out += [f"{n}={_quoted(v)}" for n, v in todo.items() if v is not None]
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write("\n".join(out) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def mask(value: str) -> str:
    if not value:
        return "(not set)"
    return "••••" + (value[-4:] if len(value) >= 12 else "")
