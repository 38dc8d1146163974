"""MCP_CONFIG: `{"mcpServers": {name: {"command", "args", "env"} | {"url", "headers"}}}`."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tools.errors import ConfigError

HEALTH_INTERVAL_S = 30.0  # MCP probe cadence; a call that fails also triggers a restart

_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")  # no "__": it separates server and tool


@dataclass(frozen=True)
class StdioServer:
    name: str
    command: str
    args: list[str] = field(default_factory=list)
    # Out of repr (and so of any log line or error that shows a server): they hold keys.
    env: dict[str, str] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class HttpServer:
    name: str
    url: str
    headers: dict[str, str] = field(default_factory=dict, repr=False)


ServerConfig = StdioServer | HttpServer


def _strings(value: object, what: str) -> dict[str, str]:
    if value is None:
        return {}
    if not isinstance(value, dict) or not all(
        isinstance(k, str) and isinstance(v, str | int | float) for k, v in value.items()
    ):
        raise ConfigError(f"MCP_CONFIG: {what} must be an object of strings")
    return {k: str(v) for k, v in value.items()}


def parse_config(data: object) -> list[ServerConfig]:
    if (
        isinstance(data, dict)
        and "mcpServers" not in data
        and isinstance(data.get("servers"), dict)
    ):
        raise ConfigError(
            'MCP_CONFIG: found "servers" (the VS Code layout); Sidekick reads '
            '{"mcpServers": {"name": {...}}}: rename the key'
        )
    if not isinstance(data, dict) or not isinstance(data.get("mcpServers"), dict):
        raise ConfigError('MCP_CONFIG: expected {"mcpServers": {"name": {...}}}')
    out: list[ServerConfig] = []
    for name, spec in data["mcpServers"].items():
        where = f"server {name!r}"
        if not _NAME.match(name) or len(name) > 30:
            raise ConfigError(
                f"MCP_CONFIG: {where}: use letters, digits, '-' and single '_' (at most 30)"
            )
        if not isinstance(spec, dict):
            raise ConfigError(f"MCP_CONFIG: {where} must be an object")
        if spec.get("disabled") is True:
            continue
        if str(spec.get("type", spec.get("transport", ""))).lower() == "sse":
            raise ConfigError(
                f"MCP_CONFIG: {where}: the legacy SSE transport is not supported; "
                "use the server's streamable HTTP url (often ending in /mcp) or its command"
            )
        if "command" in spec:
            args = spec.get("args", [])
            if not isinstance(spec["command"], str) or not spec["command"]:
                raise ConfigError(f"MCP_CONFIG: {where}: command must be a non-empty string")
            if not isinstance(args, list) or not all(isinstance(a, str) for a in args):
                raise ConfigError(f"MCP_CONFIG: {where}: args must be a list of strings")
            env = _strings(spec.get("env"), f"{where} env")
            out.append(StdioServer(name, spec["command"], list(args), env))
        elif "url" in spec:
            url = spec["url"]
            if not isinstance(url, str) or not re.match(r"^https?://", url):
                raise ConfigError(f"MCP_CONFIG: {where}: url must start with http:// or https://")
            out.append(HttpServer(name, url, _strings(spec.get("headers"), f"{where} headers")))
        else:
            raise ConfigError(f"MCP_CONFIG: {where} needs either command or url")
    return out


def load_config(path: Path | None) -> list[ServerConfig]:
    if path is None:
        return []
    try:
        text = Path(path).read_text(encoding="utf-8")
    except IsADirectoryError:
        raise ConfigError(f"MCP_CONFIG: {path} is a folder; name the JSON file") from None
    except OSError as exc:
        raise ConfigError(f"MCP_CONFIG: cannot read {path}: {exc.strerror}") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(f"MCP_CONFIG: {path} is not valid JSON (line {exc.lineno})") from None
    return parse_config(data)
