"""Skills catalogue benchmark: what installed skills cost the prompt of an empty chat.

An App is built (the real features) and given 0, 1, 10, 100 and 200 skills, installed the way
/skills add installs them (tools/skills/source.py); the figures are tokens (o200k_base) of
the system prompt (whose skills line is the catalogue) and of the first model call's
`tools` array, for a first message that needs no skill. Skills are found through
tool_search: the first skill may bring tool_search / tool_explain into view (a one-off,
when the other tools fit the budget without them); each skill adds only its catalogue entry
(at most ENTRY_TOKENS) until SKILL_CATALOG_TOKENS, and nothing beyond it.

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
            print(head + f" {'per skill after the first':>26}")
            first: int | None = None
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
                if n == 1:
                    first = total
                each = f"{(total - first) / (n - 1):.1f}" if first is not None and n > 1 else "-"
                print(f"{n:>6} {system:>7} {tools:>6} {total:>6} {count_text(line):>10} {each:>26}")
            print("the catalogue line is in `system`; from 0 to 1 skill the tools array gains")
            print("tool_search / tool_explain when the other tools showed without them (a one-off)")
        finally:
            await app.close()


if __name__ == "__main__":
    asyncio.run(main())
