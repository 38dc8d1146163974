"""Skills: folders with a SKILL.md the owner adds from the chat (tools/skills/bundle.py
checks them), found by tool_search from their one-line descriptions, loaded only when used,
their scripts run in the code sandbox (tools/skills/source.py); /skills."""

from __future__ import annotations

from pathlib import Path

from tools.feature import Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from tools.hooks import RequestHooks
    from tools.skills import commands
    from tools.skills.models import Skill
    from tools.skills.source import SKILLS, Skills

    async def installed(host: Host) -> Skills:
        skills = Skills(host.deps, Path(host.deps.data_dir) / "skills")
        await skills.reload()
        return skills

    def listed(host: Host) -> RequestHooks | None:
        """Built with the agent, once the registry is: the skills become tools only
        tool_search finds, and the system prompt's catalogue line is theirs (both kept up to
        date by the skills, read as they stand by every request)."""
        host.registry.listings.append(host.part(SKILLS).listing)
        return None

    return Setup(
        models=(Skill,),
        commands=(
            Command(
                "skills",
                "skills the owner added: list, add, turn off, remove",
                commands.skills,
                args="[add [file] | on|off|remove <name>]",
            ),
        ),
        press=commands.press,
        parts=(Provide(SKILLS, installed),),
        turns=(listed,),
    )


FEATURE = Feature(name="skills", setup=setup)
