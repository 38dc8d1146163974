"""The registry built from the features' tools (tests/e2e/test_feature_recipe.py adds a
whole feature, tool included, through the assembled app)."""

from __future__ import annotations


def test_the_prompt_names_every_offered_tool_and_only_those() -> None:
    from bot.features import tool_modules

    lines = {m.name: m.prompt for m in tool_modules()}
    assert {"search", "code", "memory", "schedule", "web_fetch"} <= set(lines)
    for name, line in lines.items():
        assert line.startswith(f"{name}: ") and "\n" not in line
