"""What a tool call does to the world, as its tool declares it (`Tool.effects`): what it reads
and writes (the internet, files, code execution, memory, messages to others) and whether it
deletes what the user kept. The approval gate (bot/approvals/gate.py) decides from this
alone, so a tool states it once, next to its code; MCP tools state it through their
annotations, and an MCP tool that says nothing is taken to write."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

if TYPE_CHECKING:  # only MCP tools need it, and they import it anyway
    from mcp_types import ToolAnnotations

Kind = Literal["internet", "files", "execution", "memory", "messages"]


@dataclass(frozen=True)
class Effects:
    reads: frozenset[Kind] = frozenset()
    writes: frozenset[Kind] = frozenset()
    deletes: bool = False  # removes something the user kept (a memory)

    def text(self) -> str:
        pairs = (("reads", self.reads), ("writes", self.writes))
        parts = [f"{verb} {', '.join(sorted(kinds))}" for verb, kinds in pairs if kinds]
        return "; ".join(parts) or "no side effects"


def effects(
    reads: tuple[Kind, ...] = (), writes: tuple[Kind, ...] = (), deletes: bool = False
) -> Effects:
    return Effects(frozenset(reads), frozenset(writes), deletes)


NONE = Effects()
# A tool's effects, fixed or depending on the call's validated arguments.
Declared = Effects | Callable[[Any], Effects]


def from_mcp(hints: ToolAnnotations | None) -> Effects:
    """An MCP tool's effects from its annotations, with the protocol's defaults for what it
    leaves out (not read-only, open world): unknown means it writes to the internet."""
    read_only = bool(hints and hints.read_only_hint)
    open_world = hints is None or hints.open_world_hint is not False
    where: Kind = "internet" if open_world else "files"
    if read_only:
        return effects(reads=(where,))
    return effects(writes=(where,))
