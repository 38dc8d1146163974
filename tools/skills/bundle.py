"""A skill as the owner sends it (a .zip of its folder, or a lone SKILL.md in the Agent
Skills layout), read and checked before anything is kept. A zip bomb, a path outside the
folder, a file too big, hidden characters, instructions that ask for secrets or to skip
approvals: each is refused in one line. What passes is still outside content when used:
this check refuses the obvious, it does not vouch."""

from __future__ import annotations

import io
import re
import stat
import unicodedata
import zipfile
import zlib
from dataclasses import dataclass, field
from pathlib import PurePosixPath

import yaml

MAX_FILES = 50
MAX_FILE_BYTES = 1024 * 1024  # one file of a skill: instructions and small scripts
MAX_TOTAL_BYTES = 5 * 1024 * 1024  # the whole folder, unpacked
MAX_UPLOAD_BYTES = MAX_TOTAL_BYTES  # the zip itself
MAX_BODY_CHARS = 20_000  # SKILL.md's instructions, loaded into a turn when the skill is used
NAME = re.compile(r"[a-z0-9][a-z0-9-]{0,47}")
SCRIPT_SUFFIXES = (".js", ".mjs", ".ts")  # what bun runs in the code sandbox
TEXT_SUFFIXES = (".md", ".txt", ".js", ".mjs", ".ts", ".py", ".sh", ".json", ".yaml", ".yml",
                 ".csv", ".html", ".css", ".xml", ".toml")  # fmt: skip

# Invisible characters that can hide instructions from the person reading the preview:
# zero-width, bidirectional overrides, word joiners, the BOM, Unicode tag characters.
HIDDEN = re.compile(
    "[\u200b-\u200f\u202a-\u202e\u2060-\u2064\u2066-\u2069\ufeff\U000e0000-\U000e007f]"
)
# What a skill has no business asking: the person's keys, or the model to skip the checks.
HOSTILE = (
    (
        re.compile(
            r"\b(api[ _-]?keys?|access[ _-]?tokens?|secret[ _-]?keys?|private[ _-]?keys?|"
            r"passwords?|credentials|bot[ _-]?token|seed phrase)\b|(?<!process)\.env\b|"
            r"\b[A-Z][A-Z0-9_]*_(?:API_KEY|TOKEN|SECRET)\b",
            re.I,
        ),
        "asks for keys or secrets",
    ),
    (
        re.compile(
            r"\b(skip|bypass|disable|turn off|ignore|avoid|without)\b[^.\n]{0,40}"
            r"\b(approvals?|confirmations?|asking (the )?(user|owner|person)|permission)\b|"
            r"\bignore (all |any )?(previous|prior|above|earlier) instructions\b|"
            r"\bdo(n't| not) (ask|tell) the (user|owner|person)\b",
            re.I,
        ),
        "tells the model to skip approvals or hide what it does",
    ),
)


class Refused(ValueError):
    """A skill that is not installed; the text says why, in one line."""


@dataclass
class Bundle:
    name: str
    description: str
    body: str  # SKILL.md without its front matter
    files: dict[str, bytes] = field(default_factory=dict)  # every file, SKILL.md too

    @property
    def scripts(self) -> list[str]:
        return [p for p in self.files if p.startswith("scripts/") or p.endswith(SCRIPT_SUFFIXES)]


def front_matter(text: str) -> tuple[dict[str, object], str]:
    """(the YAML front matter, the Markdown body)."""
    m = re.match(r"\A---[ \t]*\r?\n(.*?)\r?\n---[ \t]*(?:\r?\n|\Z)", text, re.S)
    if m is None:
        raise Refused("SKILL.md has no front matter (--- name: … description: … ---).")
    try:
        meta = yaml.safe_load(m.group(1))
    except yaml.YAMLError as exc:
        raise Refused(f"SKILL.md's front matter is not valid YAML: {str(exc)[:120]}") from None
    if not isinstance(meta, dict):
        raise Refused("SKILL.md's front matter must be `key: value` lines.")
    return meta, text[m.end() :]


def from_upload(filename: str, data: bytes) -> Bundle:
    """A skill from what the owner sent: a .zip of its folder, or SKILL.md itself."""
    if len(data) > MAX_UPLOAD_BYTES:
        raise Refused(f"{filename} is {len(data) / 2**20:.0f} MB; a skill may be at most 5 MB.")
    if filename.lower().endswith(".zip") or data[:4] == b"PK\x03\x04":
        return _bundle(_unzip(data))
    return _bundle({"SKILL.md": data})


def _unzip(data: bytes) -> dict[str, bytes]:
    try:
        z = zipfile.ZipFile(io.BytesIO(data))
    except zipfile.BadZipFile:
        raise Refused("That is not a zip file I can read.") from None
    infos = [i for i in z.infolist() if not i.is_dir()]
    if len(infos) > MAX_FILES:
        raise Refused(f"The zip holds {len(infos)} files; a skill may have {MAX_FILES}.")
    declared = sum(i.file_size for i in infos)
    if declared > MAX_TOTAL_BYTES:
        raise Refused(
            f"The zip unpacks to {declared / 2**20:.0f} MB (a zip bomb, or too big); "
            "a skill may be 5 MB."
        )
    files: dict[str, bytes] = {}
    for info in infos:
        path = _safe_path(info.filename)
        if stat.S_ISLNK(info.external_attr >> 16):
            raise Refused(f"{info.filename} is a link; a skill's files must be plain files.")
        if info.file_size > MAX_FILE_BYTES:
            raise Refused(
                f"{path} is {info.file_size / 2**20:.0f} MB; one file of a skill may be 1 MB."
            )
        try:  # the header may lie: read no more than the limit allows
            with z.open(info) as f:
                content = f.read(MAX_FILE_BYTES + 1)
        except (zipfile.BadZipFile, zlib.error, EOFError, NotImplementedError, RuntimeError) as e:
            # A size or checksum that does not match, an unknown method, a password.
            raise Refused(f"{path} in the zip is damaged or encrypted ({e}).") from None
        if len(content) > MAX_FILE_BYTES:
            raise Refused(f"{path} unpacks past 1 MB (its size in the zip was false).")
        files[path] = content
    # A zip of the folder itself (`my-skill/SKILL.md`): the folder is the skill.
    tops = {p.split("/", 1)[0] for p in files}
    if "SKILL.md" not in files and len(tops) == 1 and all("/" in p for p in files):
        files = {p.split("/", 1)[1]: c for p, c in files.items()}
    return files


def _safe_path(name: str) -> str:
    if "\\" in name or name.startswith("/") or re.match(r"[A-Za-z]:", name):
        raise Refused(f"{name!r} points outside the skill's folder.")
    parts = PurePosixPath(name).parts
    if any(p == ".." for p in parts) or not parts:
        raise Refused(f"{name!r} points outside the skill's folder.")
    return "/".join(p for p in parts if p != ".")


def _bundle(files: dict[str, bytes]) -> Bundle:
    if "SKILL.md" not in files:
        raise Refused("No SKILL.md at the top of the skill's folder.")
    texts: dict[str, str] = {}
    for path, content in files.items():
        if path.lower().endswith(TEXT_SUFFIXES):
            try:
                texts[path] = content.decode("utf-8")
            except UnicodeDecodeError:
                raise Refused(f"{path} is not UTF-8 text.") from None
    for path, text in texts.items():
        _check_text(path, text)
    meta, body = front_matter(texts["SKILL.md"])
    name, description = meta.get("name"), meta.get("description")
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise Refused(
            "SKILL.md's `name` must be lower-case letters, digits and hyphens (at most 48)."
        )
    if not isinstance(description, str) or not description.strip():
        raise Refused("SKILL.md needs a `description`: one line on when to use the skill.")
    if len(description) > 1024 or len(body) > MAX_BODY_CHARS:
        raise Refused("SKILL.md is too long (description 1024 characters, body 20,000).")
    return Bundle(name, " ".join(description.split()), body.strip(), files)


def _check_text(path: str, text: str) -> None:
    if (m := HIDDEN.search(text)) is not None:
        line = text.count("\n", 0, m.start()) + 1
        char = f"U+{ord(m.group()):04X} {unicodedata.name(m.group(), '')}".strip()
        raise Refused(f"{path} hides text in invisible characters ({char}, line {line}).")
    for pattern, what in HOSTILE:
        if (m := pattern.search(text)) is not None:
            line = text.count("\n", 0, m.start()) + 1
            raise Refused(f"{path} {what} (line {line}: “{m.group()}”).")
