"""A stdio MCP server for tests, built on the official SDK's server side.

Offers the sixty tools of mcp_catalog (each echoes its name and arguments), plus with
`--extras`: `crash` (the process dies), `slow` (sleeps far past any test timeout),
`garbage` (writes non-JSON lines to stdout, then answers), `garbage_only` (junk, no
answer), `fail` (an is_error result), `env_keys` (the variable names it sees) and `learn`
(offers one more echo tool, named by its `query`, from the next tool listing on).
"""

from __future__ import annotations

import json
import os
import sys
import time
from typing import Any

from mcp.server import MCPServer

sys.path.insert(0, os.path.dirname(__file__))
from mcp_catalog import TOOLS


def _echo(name: str) -> Any:
    def tool(query: str = "", target: str = "", amount: float | None = None) -> str:
        args = {k: v for k, v in {"query": query, "target": target, "amount": amount}.items() if v}
        return f"{name} ok {json.dumps(args, sort_keys=True)}"

    return tool


def build(extras: bool) -> MCPServer:
    server = MCPServer("fake")
    for name, description in TOOLS:
        server.add_tool(_echo(name), name=name, description=description)
    if extras:

        def crash() -> str:
            os._exit(3)

        def slow() -> str:
            time.sleep(600)
            return "late"

        def garbage() -> str:
            sys.stdout.write("this is not json\n{broken\n")
            sys.stdout.flush()
            return "garbage sent"

        def garbage_only() -> str:
            sys.stdout.write("\x00\x01 not json at all\n")
            sys.stdout.flush()
            time.sleep(600)
            return "never"

        def fail() -> str:
            raise ValueError("the remote thing broke")

        def env_keys() -> str:
            return " ".join(sorted(os.environ))

        def learn(query: str) -> str:
            server.add_tool(_echo(query), name=query, description=f"learned at run time: {query}")
            return f"learned {query}"

        for fn in (crash, slow, garbage, garbage_only, fail, env_keys, learn):
            server.add_tool(fn, name=fn.__name__, description=f"test tool {fn.__name__}")
    return server


if __name__ == "__main__":
    server = build("--extras" in sys.argv)
    if "--http" in sys.argv:  # streamable HTTP on 127.0.0.1:PORT/mcp
        port = int(sys.argv[sys.argv.index("--http") + 1])
        server.run("streamable-http", host="127.0.0.1", port=port)
    else:
        server.run("stdio")
