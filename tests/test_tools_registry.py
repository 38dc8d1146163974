"""Adding a tool is its folder and one line in tools/registry.py's TOOLS: a throwaway tool
written to a temp folder shows up in the settings (read from the environment, its key
scrubbed), the doctor, the system prompt and the schemas the model is offered. Run in a
fresh interpreter, where the line is added before the settings class is made, as an edit
of the registry would."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

TOOL_PY = """
from pydantic import BaseModel, SecretStr

from tools.base import CheckResult, Tool, ToolCall, ToolDeps, ToolModule


class ThrowawaySettings(BaseModel):
    throwaway_greeting: str = "hi"
    throwaway_key: SecretStr | None = None


class Params(BaseModel):
    name: str


def build(deps: ToolDeps) -> Tool[Params]:
    greeting = deps.settings_for(ThrowawaySettings).throwaway_greeting

    async def run(p: Params, call: ToolCall) -> str:
        return f"{greeting}, {p.name}"

    return Tool("throwaway", "Greets someone by name.", Params, run)


async def doctor(deps: ToolDeps) -> list[CheckResult]:
    return [CheckResult("throwaway", True, "greets")]


TOOL = ToolModule(
    name="throwaway",
    build=build,
    prompt="throwaway: greet someone by name.",
    settings=ThrowawaySettings,
    doctor=doctor,
)
"""

PROBE = """
import asyncio, json, sys
from datetime import UTC, datetime
sys.path.insert(0, sys.argv[1])

import tools.registry
from throwaway_tool.tool import TOOL
tools.registry.TOOLS = (*tools.registry.TOOLS, TOOL)  # the one registry line

from bot.agent.prompt import system_prompt
from bot.app import build_app
from bot.config import load_settings
from bot.doctor import all_checks

async def main():
    s = load_settings(data_dir=sys.argv[1] + "/data", llm_model="m",
                      llm_base_url="http://127.0.0.1:9/v1")
    app = await build_app(s)
    try:
        checks = {c.__name__: c for c in all_checks()}
        rows = await checks["check_throwaway"](app)
        tool = app.registry.tools["throwaway"]
        ran = await tool.run(tool.params(name="Ann"), None)
        prompt = system_prompt("", app.registry.prompt_lines())
        print(json.dumps({
            "greeting": s.throwaway_greeting,
            "scrubbed": "sk-throwaway-secret" in s.secrets(),
            "doctor": [r.detail for r in rows],
            "schemas": [t["function"]["name"] for t in app.registry.schemas()],
            "ran": ran,
            "prompt": "- throwaway: greet someone by name." in prompt,
        }))
    finally:
        await app.close()

asyncio.run(main())
"""


def test_a_tool_folder_and_one_registry_line_are_all_it_takes(tmp_path: Path) -> None:
    folder = tmp_path / "throwaway_tool"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "tool.py").write_text(TOOL_PY)
    env = {
        "PATH": "/usr/bin:/bin",
        "HOME": str(tmp_path),
        "THROWAWAY_GREETING": "hello",
        "THROWAWAY_KEY": "sk-throwaway-secret",
    }
    done = subprocess.run(
        [sys.executable, "-c", PROBE, str(tmp_path)],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=180,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    got = json.loads(done.stdout.strip().splitlines()[-1])
    assert got["greeting"] == "hello"  # its setting is read from the environment
    assert got["scrubbed"] is True  # its SecretStr joins secrets() by itself
    assert got["doctor"] == ["greets"]
    assert "throwaway" in got["schemas"] and got["ran"] == "hello, Ann"
    assert got["prompt"] is True


def test_the_prompt_names_every_offered_tool_and_only_those() -> None:
    from tools.registry import TOOLS

    lines = {m.name: m.prompt for m in TOOLS}
    assert {"search", "code", "memory", "schedule", "web_fetch"} <= set(lines)
    for name, line in lines.items():
        assert line.startswith(f"{name}: ") and "\n" not in line
