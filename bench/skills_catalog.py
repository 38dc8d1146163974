"""Skills catalogue benchmark: what installed skills cost the prompt of an empty chat.

An App is built (the real features) and given 0, 1, 10, 100 and 200 skills, installed the way
/skills add installs them (tools/skills/source.py); the figures are tokens (o200k_base) of
the system prompt (whose skills line is the catalogue) and of the first model call's
`tools` array, for a first message that needs no skill. A skill adds only its catalogue
entry (the line's header counted in the first one's share): at most ENTRY_TOKENS each, and
nothing past SKILL_CATALOG_TOKENS. No schema joins the tools array: tool_search /
tool_explain come only with a request whose words meet a skill (or when the other tools
overflow the budget), and a skill's own schema only when it is called or explained.

Usage: python bench/skills_catalog.py
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from bot.agent.prompt import system_prompt  # noqa: E402
from bot.app import build_app  # noqa: E402
from bot.config import load_settings  # noqa: E402
from tools.base import RequestContext  # noqa: E402
from tools.skills.bundle import from_upload  # noqa: E402
from tools.skills.source import ENTRY_TOKENS, SKILL_CATALOG_TOKENS, SKILLS  # noqa: E402
from tools.tokens import count_payload, count_text, tokenizer_name  # noqa: E402

TOPICS = (
    "PDF forms", "expense reports", "meeting notes", "travel plans", "recipes",
    "invoices", "tax returns", "workout logs", "book summaries", "garden care",
)  # fmt: skip


def skill_md(i: int) -> bytes:
    topic = TOPICS[i % len(TOPICS)]
    return (
        f"---\nname: skill-{i:03d}\ndescription: Prepare and check {topic.lower()} "
        f"step by step, variant {i}.\n---\n# {topic}\nSteps for {topic.lower()}.\n"
    ).encode()


async def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        settings = load_settings(
            data_dir=Path(tmp), llm_base_url="http://127.0.0.1:9/v1", llm_model="bench"
        )
        app = await build_app(settings)
        try:
            skills = app.part(SKILLS)
            print(
                f"tokenizer {tokenizer_name()}, ENTRY_TOKENS {ENTRY_TOKENS}, "
                f"SKILL_CATALOG_TOKENS {SKILL_CATALOG_TOKENS}"
            )
            head = f"{'skills':>6} {'system':>7} {'tools':>6} {'total':>6} {'catalogue':>10}"
            print(head + f" {'per skill':>10}")
            base = 0
            installed = 0
            for n in (0, 1, 10, 100, 200):
                while installed < n:
                    bundle = from_upload("SKILL.md", skill_md(installed))
                    await skills.install(bundle, datetime.now(UTC))
                    installed += 1
                system = count_text(system_prompt("Bench", app.registry.prompt_lines()))
                ctx = RequestContext("bench", 1, 1, None)
                tools = count_payload(app.registry.for_request(ctx, "hello").schemas())
                line = skills.catalogue()
                total = system + tools
                if n == 0:
                    base = total
                each = f"{(total - base) / n:.1f}" if n else "-"
                print(f"{n:>6} {system:>7} {tools:>6} {total:>6} {count_text(line):>10} {each:>10}")
            print("per skill: what the empty chat's prompt grew by, over the skills installed;")
            print("the catalogue line is in `system`")
        finally:
            await app.close()


if __name__ == "__main__":
    asyncio.run(main())
