"""The layer rule, read from the code's own imports (ast, no import is executed):

bot/ (app, adapters, wiring) -> scheduler/ and tools/ -> db/. Nothing below imports
from above, db/ imports nothing of ours, only bot/telegram imports aiogram, and the
imports of bot/ db/ tools/ scheduler/ form no circle.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
OURS = ("bot", "db", "tools", "scheduler", "migrations")
# Who may import whom (besides itself).
ALLOWED: dict[str, set[str]] = {
    "db": {"migrations"},  # the migration scripts are the schema's history
    "tools": {"db"},
    "scheduler": {"db", "tools"},
}


def modules(package: str) -> Iterator[tuple[str, Path]]:
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = path.relative_to(ROOT).with_suffix("")
        parts = list(rel.parts)
        if parts[-1] == "__init__":
            parts.pop()
        yield ".".join(parts), path


def imported(path: Path, *, top_level_only: bool = False) -> Iterator[tuple[int, str]]:
    """(line, module) for every import; with top_level_only, only those that run when
    the module is imported (not inside functions or `if TYPE_CHECKING:`)."""
    tree = ast.parse(path.read_text(), str(path))
    nodes: list[ast.AST] = list(ast.walk(tree)) if not top_level_only else list(tree.body)
    for node in nodes:
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.lineno, node.module
        elif isinstance(node, ast.ImportFrom) and node.level:
            raise AssertionError(f"{path}:{node.lineno}: use absolute imports")


def test_the_parser_sees_an_upward_import(tmp_path: Path) -> None:
    bad = tmp_path / "m.py"
    bad.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from bot.app import App\n"
    )
    assert [m for _, m in imported(bad)] == ["typing", "bot.app"]
    assert [m for _, m in imported(bad, top_level_only=True)] == ["typing"]


@pytest.mark.parametrize("layer", sorted(ALLOWED))
def test_lower_layers_never_import_upward(layer: str) -> None:
    wrong = []
    for _name, path in modules(layer):
        for line, mod in imported(path):
            top = mod.split(".")[0]
            if top in OURS and top != layer and top not in ALLOWED[layer]:
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports {mod}")
            if top == "aiogram":
                wrong.append(f"{path.relative_to(ROOT)}:{line} imports aiogram")
    assert not wrong, "\n".join(wrong)


def test_only_the_telegram_adapter_imports_aiogram() -> None:
    wrong = [
        f"{path.relative_to(ROOT)}:{line}"
        for name, path in modules("bot")
        if not name.startswith("bot.telegram")
        for line, mod in imported(path)
        if mod.split(".")[0] == "aiogram"
    ]
    assert not wrong, wrong


def test_no_import_circle() -> None:
    # Every import counts, also those inside functions or `if TYPE_CHECKING:`: a circle
    # hidden in a function is still two modules that cannot be read one without the other.
    names = {n: p for package in ("bot", "db", "tools", "scheduler") for n, p in modules(package)}
    graph: dict[str, set[str]] = {}
    for name, path in names.items():
        deps = set()
        for _, mod in imported(path):
            # `import tools.a.b` also runs tools/a/__init__: count the longest known module.
            while mod and mod not in names:
                mod = mod.rpartition(".")[0]
            if mod and mod != name:
                deps.add(mod)
        graph[name] = deps

    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph[node]):
            if state.get(nxt) == 1:
                cycle = [*stack[stack.index(nxt) :], nxt]
                raise AssertionError("import circle: " + " -> ".join(cycle))
            if nxt not in state:
                visit(nxt)
        stack.pop()
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node)
