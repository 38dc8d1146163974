"""/skills: what is installed (on or off), adding one the owner sent (a preview with the
instructions and every file, then Allow / Deny), turning one off or removing it."""

from __future__ import annotations

import asyncio
from pathlib import Path

from tools.admission import ADMISSION
from tools.code.files import user_key
from tools.feature import Answer, Button, CommandCall, Pressed
from tools.skills.bundle import MAX_UPLOAD_BYTES, Bundle, Refused, from_upload
from tools.skills.source import SKILLS, Skills, tool_name

USAGE = "/skills add [file] (the .zip or SKILL.md you just sent) · /skills off|on|remove <name>"
OWNER_ONLY = "Only the bot's owner can add or change skills."
PREVIEW_CHARS = 2500


async def _owner(call: CommandCall) -> bool:
    """The owner as the access feature knows them (tools/admission.py), or the terminal's
    local user (the person at the machine): a skill steers the model for everyone, so only
    they decide."""
    if call.host.local:
        return True
    if not call.host.has(ADMISSION):
        return False
    owner = await (await call.host.need(ADMISSION)).owner()
    return owner is not None and call.who.telegram_id == owner


async def skills(call: CommandCall) -> Answer | str:
    store = call.host.part(SKILLS)
    verb, _, rest = call.args.strip().partition(" ")
    verb, rest = verb.lower(), rest.strip()
    if not verb:
        return _listing(store)
    if not await _owner(call):
        return OWNER_ONLY
    if verb == "add":
        return await _add(call, store, rest)
    if verb not in ("on", "off", "remove") or not rest:
        return USAGE
    removing = verb == "remove"
    if not await (store.remove(rest) if removing else store.set_enabled(rest, verb == "on")):
        return f"No skill named {rest!r}. " + USAGE
    return f"Skill {rest} removed, with its files." if removing else f"Skill {rest} is {verb}."


def _listing(store: Skills) -> str:
    if not store.installed:
        return "No skills installed. Send me a skill's .zip or SKILL.md, then " + USAGE
    lines = [
        f"• {r.name} ({'on' if r.enabled else 'off'}, {r.files} file(s)): {r.description}"
        for r in store.installed
    ]
    return "Skills (tool_search finds them when a request needs one):\n" + "\n".join(
        [*lines, "", USAGE]
    )


async def _add(call: CommandCall, store: Skills, name: str) -> Answer | str:
    folder = call.host.deps.data_dir / "inputs" / user_key(call.who.telegram_id, call.who.user_id)
    path = await asyncio.to_thread(_upload, folder, name)
    if path is None:
        return "Send me the skill first (a .zip of its folder, or its SKILL.md), then /skills add."
    try:
        if path.stat().st_size > MAX_UPLOAD_BYTES:
            raise Refused(f"{path.name} is over 5 MB; a skill may be at most 5 MB.")
        data = await asyncio.to_thread(path.read_bytes)
        bundle = await asyncio.to_thread(from_upload, path.name, data)
    except Refused as why:
        return f"Not installed: {why}"
    token = store.preview(bundle)
    buttons = ((Button("Allow", f"allow:{token}"), Button("Deny", f"deny:{token}")),)
    return Answer(preview_text(bundle), buttons)


def _upload(folder: Path, name: str) -> Path | None:
    """The file named, or the newest upload that looks like a skill."""
    if not folder.is_dir():
        return None
    files = [p for p in folder.iterdir() if p.is_file() and not p.name.startswith(".")]
    if name:
        return next((p for p in files if p.name == name), None)
    fits = [p for p in files if p.suffix.lower() in (".zip", ".md")]
    return max(fits, key=lambda p: p.stat().st_mtime, default=None)


def preview_text(bundle: Bundle) -> str:
    body = bundle.body
    if len(body) > PREVIEW_CHARS:
        body = body[:PREVIEW_CHARS] + f"\n… ({len(bundle.body) - PREVIEW_CHARS:,} more characters)"
    files = [f"• {p} ({len(c):,} bytes)" for p, c in sorted(bundle.files.items())]
    scripts = bundle.scripts
    runs = (
        f"Its scripts ({', '.join(scripts)}) would run only in the code sandbox, like code."
        if scripts
        else "It has no scripts."
    )
    return (
        f"Install the skill {bundle.name}?\n{bundle.description}\n\n"
        f"Instructions:\n{body}\n\nFiles ({len(files)}):\n" + "\n".join(files) + "\n\n"
        f"{runs} The model reads it as outside content (like a web page): it cannot turn "
        f"approvals off or give itself tools. It will be called {tool_name(bundle.name)}."
    )


async def press(call: CommandCall) -> Pressed:
    verb, _, token = call.args.partition(":")
    if not await _owner(call):
        return Pressed(OWNER_ONLY, alert=True)
    store = call.host.part(SKILLS)
    bundle = store.pending.pop(token, None)
    if bundle is None:
        return Pressed("That preview is out of date; send /skills add again.", alert=True)
    if verb != "allow":
        return Pressed("Not installed.", Answer(f"Skill {bundle.name}: not installed."))
    await store.install(bundle, call.host.deps.clock())
    return Pressed(
        "Installed.",
        Answer(f"Skill {bundle.name} installed: {bundle.description}\n/skills lists it."),
    )
