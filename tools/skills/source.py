"""Installed skills as the model meets them: each an extension tool `skill_<name>` that
tool_search finds (never shown up front), named in one line of the system prompt. Calling
it loads the instructions, as outside content, or runs one of its scripts in the code
sandbox (traced as the skill's). A skill cannot change approvals or give itself tools: its
text reaches the model only as a tool result."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
import json
import shutil
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, cast

from pydantic import BaseModel, Field
from sqlalchemy import delete, select, update
from sqlalchemy.engine import CursorResult

from tools.base import Listing, Tool, ToolCall, ToolDeps, ToolError
from tools.code.repo import SKILL_RUN
from tools.code.tool import MAX_TIMEOUT_MS, CodeService, run_fields
from tools.effects import Effects, effects
from tools.skills.bundle import SCRIPT_SUFFIXES, Bundle, front_matter
from tools.skills.models import Skill
from tools.state import Key
from tools.tokens import count_text

# Tokens the system prompt's skills line may take; past it, the rest are counted ("and N
# more"), still found through tool_search.
SKILL_CATALOG_TOKENS = 300
ENTRY_TOKENS = 10  # one skill's entry in that line, at most
# The line (after the system prompt's "\n- "): the skills are named by their tools, which the
# model may call by that name (tools/registry.py loads one called so) or find with
# tool_search on a request that mentions one.
CATALOGUE_HEAD = "Skills:"
LINE_BREAK = "\n- "
MORE_TOKENS = 5  # " and 123 more" at most
SCRIPT_TIMEOUT_MS = 30_000
MAX_PENDING = 20  # previews waiting for Allow / Deny


def tool_name(skill: str) -> str:
    return "skill_" + skill.replace("-", "_")


class SkillParams(BaseModel):
    script: str | None = Field(
        default=None, description="A script of the skill to run (as listed); omit to read it"
    )
    args: list[str] = Field(default_factory=list, description="Arguments for the script")
    network: bool = Field(
        default=False, description="Give the script the internet (the person is asked first)"
    )


@dataclass
class Installed:
    name: str
    description: str
    enabled: bool
    files: int


@dataclass
class Skills:
    """The installed skills (their rows, their folders), the previews waiting for the
    owner's answer, and the tools the registry lists (its listing: tools/registry.py listings)."""

    deps: ToolDeps
    folder: Path
    installed: list[Installed] = field(default_factory=list)
    pending: dict[str, Bundle] = field(default_factory=dict)
    # The enabled skills' tools and the catalogue line, as the registry reads them (made
    # when the skills change, not per message).
    listing: Listing = field(default_factory=lambda: Listing(searched=True))
    _code: CodeService | None = None

    async def reload(self) -> None:
        async with self.deps.session_factory() as s:
            rows = (await s.execute(select(Skill).order_by(Skill.name))).scalars().all()
        self.installed = [Installed(r.name, r.description, r.enabled, r.files) for r in rows]
        # The same Tool objects while nothing changed: discovery re-indexes on a change only.
        kept = self.listing.tools
        tools: dict[str, Tool[Any]] = {}
        for r in self.installed:
            if not r.enabled:
                continue
            old = kept.get(tool_name(r.name))
            if old is not None and old.description == r.description:
                tools[old.name] = old
            else:
                tools[tool_name(r.name)] = self._tool(r.name, r.description)
        self.listing.tools = tools
        # Counting loads the tokenizer, so off the loop; without skills no line, and no
        # thread started for it (a failed build leaves none behind).
        self.listing.line = await asyncio.to_thread(self._catalogue) if tools else ""

    def _catalogue(self) -> str:
        """Each skill's tool name and the start of its description within ENTRY_TOKENS, the
        header and its line break counted in the first entry's share, so n skills cost an
        empty chat at most n * ENTRY_TOKENS, and never more than SKILL_CATALOG_TOKENS."""
        on = [r for r in self.installed if r.enabled]
        limit = min(len(on) * ENTRY_TOKENS, SKILL_CATALOG_TOKENS)
        entries: list[tuple[str, int]] = []
        used = count_text(LINE_BREAK + CATALOGUE_HEAD)
        for i, r in enumerate(on):
            # Room up to this skill's share: what earlier entries left unused carries on.
            cap = min((i + 1) * ENTRY_TOKENS, SKILL_CATALOG_TOKENS)
            entry = _entry(";" if entries else "", tool_name(r.name), r.description, cap - used)
            if entry is not None:  # else still found by tool_search, counted below
                entries.append((entry, count_text(entry)))
                used += entries[-1][1]
        left = len(on) - len(entries)
        # "and N more" fits the limit too: the last entries make room for it.
        while left and entries and used + MORE_TOKENS > limit:
            used -= entries.pop()[1]
            left += 1
        more = f" and {left} more" if left else ""
        return CATALOGUE_HEAD + "".join(e for e, _ in entries) + more

    def preview(self, bundle: Bundle) -> str:
        token = hashlib.sha256(_digest(bundle).encode()).hexdigest()[:16]
        if len(self.pending) >= MAX_PENDING:
            self.pending.pop(next(iter(self.pending)))
        self.pending[token] = bundle
        return token

    async def install(self, bundle: Bundle, now: datetime) -> None:
        target = self.folder / bundle.name
        staging = self.folder / f".new-{bundle.name}"
        await asyncio.to_thread(_write, staging, bundle.files)
        await asyncio.to_thread(shutil.rmtree, target, True)
        staging.rename(target)
        async with self.deps.session_factory() as s, s.begin():
            await s.execute(delete(Skill).where(Skill.name == bundle.name))
            s.add(
                Skill(
                    name=bundle.name,
                    description=bundle.description,
                    enabled=True,
                    files=len(bundle.files),
                    sha256=_digest(bundle),
                    installed_at=now,
                )
            )
        await self.reload()

    async def set_enabled(self, name: str, on: bool) -> bool:
        async with self.deps.session_factory() as s, s.begin():
            done = await s.execute(update(Skill).where(Skill.name == name).values(enabled=on))
        await self.reload()
        return bool(cast(CursorResult[Any], done).rowcount)

    async def remove(self, name: str) -> bool:
        async with self.deps.session_factory() as s, s.begin():
            done = await s.execute(delete(Skill).where(Skill.name == name))
        await asyncio.to_thread(shutil.rmtree, self.folder / name, True)
        await self.reload()
        return bool(cast(CursorResult[Any], done).rowcount)

    def _tool(self, name: str, description: str) -> Tool[SkillParams]:
        source = f"the skill {name}"
        read: Effects = effects(reads=("files",), outside=source)
        # A script runs without the network unless the call asks for it, and then the person
        # is asked (bot/approvals/gate.py): nothing a skill's script read can leave unasked.
        ran: Effects = effects(writes=("execution",), outside=source)
        networked: Effects = effects(writes=("execution", "internet"), outside=source)

        def fx(p: SkillParams) -> Effects:
            # Only a script bun runs writes: a Python one is refused before anything runs.
            if not (p.script and p.script.strip().endswith(SCRIPT_SUFFIXES)):
                return read
            return networked if p.network else ran

        async def run(p: SkillParams, call: ToolCall) -> dict[str, Any]:
            folder = self.folder / name
            files = await asyncio.to_thread(_listing, folder)
            if p.script is None:
                text = await asyncio.to_thread((folder / "SKILL.md").read_text, "utf-8")
                return {
                    "skill": name,
                    "instructions": front_matter(text)[1].strip(),
                    "files": files,
                    "scripts": [f for f in files if f.endswith((*SCRIPT_SUFFIXES, ".py"))],
                    "note": "a script runs with script=<path>; it runs sandboxed, like code",
                }
            return await self._run_script(name, folder, files, p, call)

        return Tool(tool_name(name), description, SkillParams, run, effects=fx)

    async def _run_script(
        self, name: str, folder: Path, files: list[str], p: SkillParams, call: ToolCall
    ) -> dict[str, Any]:
        script = (p.script or "").strip().removeprefix("./")
        if script not in files:
            raise ToolError(f"the skill {name} has no file {p.script!r}; its files: {files}")
        if script.endswith(".py"):
            raise ToolError(
                f"{script} is a Python script, and the code sandbox runs only JavaScript and "
                "TypeScript (bun): it was not run. Do its steps another way, or tell the person."
            )
        if not script.endswith(SCRIPT_SUFFIXES):
            raise ToolError(f"{script} is not a script (.js, .mjs or .ts run here).")
        if self._code is None:
            self._code = CodeService(self.deps)
        if self._code.runner is None:
            raise ToolError(f"scripts cannot run here: {self._code.problem}")
        body = await asyncio.to_thread((folder / script).read_text, "utf-8")
        # Named in the trace (its reasoning and first line), so /codestats and
        # /codefailures show which skill ran what.
        code = (
            f"// skill {name}: {script}\n"
            f"process.argv.splice(2, Infinity, ...{json.dumps([str(a) for a in p.args])});\n" + body
        )
        named = dataclasses.replace(call, reasoning=f"{SKILL_RUN}{name}: {script}")
        row_id, res, cat = await self._code.execute(code, SCRIPT_TIMEOUT_MS, named, p.network)
        return {"skill": name, "script": script, **run_fields(res, cat, row_id)}


assert SCRIPT_TIMEOUT_MS <= MAX_TIMEOUT_MS

SKILLS: Key[Skills] = Key("skills.installed")


def _entry(sep: str, name: str, description: str, room: int) -> str | None:
    """`; name (the description's first words)`, as many words as fit `room` tokens; the
    bare name when none do; None when not even that fits (a name is never cut: it is what
    the model calls)."""
    words = description.split()
    for n in range(min(len(words), 6), -1, -1):
        entry = f"{sep} {name}" + (f" ({' '.join(words[:n])})" if n else "")
        if count_text(entry) <= room:
            return entry
    return None


def _digest(bundle: Bundle) -> str:
    h = hashlib.sha256()
    for path in sorted(bundle.files):
        h.update(path.encode() + b"\0" + hashlib.sha256(bundle.files[path]).digest())
    return h.hexdigest()


def _write(folder: Path, files: dict[str, bytes]) -> None:
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True, mode=0o700)
    for rel, content in files.items():
        path = folder.joinpath(*rel.split("/"))
        if not path.resolve().is_relative_to(folder.resolve()):
            raise ValueError(f"{rel} is outside the skill's folder")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content)


def _listing(folder: Path) -> list[str]:
    return sorted(
        p.relative_to(folder).as_posix()
        for p in folder.rglob("*")
        if p.is_file() and not p.is_symlink()
    )
