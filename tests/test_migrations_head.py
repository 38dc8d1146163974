"""The migrations form one line: exactly one head, so `upgrade head` is unambiguous."""

from alembic.script import ScriptDirectory

from db.migrate import alembic_config


def test_exactly_one_head() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    heads = script.get_heads()
    assert len(heads) == 1, f"several migration heads: {heads}; add a merge revision"


def test_every_revision_after_the_merge_has_one_parent() -> None:
    script = ScriptDirectory.from_config(alembic_config())
    for rev in script.walk_revisions():
        parents = rev.down_revision
        if isinstance(parents, tuple) and rev.revision != "0006":
            raise AssertionError(f"{rev.revision} merges {parents}: keep history linear")
