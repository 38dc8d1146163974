"""What a skill upload may be (tools/skills/bundle.py): the layouts people already have are
read as they are; links, escaping paths, headers that lie about sizes and bad front matter
are refused with the reason."""

from __future__ import annotations

import io
import stat
import zipfile

import pytest

from tools.skills.bundle import MAX_FILE_BYTES, Refused, from_upload

MD = "---\nname: notes\ndescription: Tidy meeting notes.\n---\nSort the notes by topic.\n"


def _zip(entries: list[tuple[zipfile.ZipInfo | str, bytes]]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        for info, data in entries:
            z.writestr(info, data)
    return buf.getvalue()


def test_a_lone_skill_md_and_a_zip_at_the_top_level_are_read() -> None:
    alone = from_upload("SKILL.md", MD.encode())
    assert (alone.name, alone.description, alone.body) == (
        "notes", "Tidy meeting notes.", "Sort the notes by topic."
    )  # fmt: skip
    flat = from_upload("x.zip", _zip([("SKILL.md", MD.encode()), ("run.ts", b"process.env.X")]))
    assert sorted(flat.files) == ["SKILL.md", "run.ts"] and flat.scripts == ["run.ts"]


def test_a_link_in_the_zip_is_refused() -> None:
    link = zipfile.ZipInfo("secrets")
    link.external_attr = (stat.S_IFLNK | 0o777) << 16
    data = _zip([("SKILL.md", MD.encode()), (link, b"/home/me/.ssh/id_rsa")])
    with pytest.raises(Refused, match="is a link"):
        from_upload("x.zip", data)


@pytest.mark.parametrize("name", ["/etc/passwd", "a\\..\\b.js", "C:/x.js", "ok/../../x"])
def test_paths_outside_the_folder_are_refused(name: str) -> None:
    with pytest.raises(Refused, match="outside the skill's folder"):
        from_upload("x.zip", _zip([("SKILL.md", MD.encode()), (name, b"1")]))


def test_a_header_that_lies_about_a_size_is_caught_while_reading() -> None:
    big = b"\0" * (MAX_FILE_BYTES + 10)
    data = bytearray(_zip([("SKILL.md", MD.encode()), ("pad.bin", big)]))
    # Both headers of pad.bin claim 10 bytes: reading it finds out, and says so.
    real = len(big).to_bytes(4, "little")
    data = data.replace(real, (10).to_bytes(4, "little"))
    with pytest.raises(Refused, match=r"pad\.bin in the zip is damaged"):
        from_upload("x.zip", bytes(data))


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("no front matter\n", "has no front matter"),
        ("---\nname: [a\n---\n", "not valid YAML"),
        ("---\nname: Bad Name\ndescription: x\n---\n", "lower-case letters"),
        ("---\nname: ok\n---\n", "needs a `description`"),
    ],
)
def test_bad_front_matter_is_refused(text: str, why: str) -> None:
    with pytest.raises(Refused, match=why):
        from_upload("SKILL.md", text.encode())
