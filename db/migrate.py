"""Apply Alembic migrations to an engine's database (at startup and `sidekick migrate`)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TYPE_CHECKING

from sqlalchemy import Column, Constraint, Index, MetaData, Table, inspect, text
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine

from db.engine import create_engine

if TYPE_CHECKING:
    from alembic.config import Config


def _versions_dir() -> Path:
    import migrations

    return Path(migrations.__file__).parent / "versions"


def alembic_config() -> Config:
    from alembic.config import Config

    cfg = Config()
    cfg.set_main_option("script_location", str(_versions_dir().parent))
    return cfg


def script_heads(versions: Path | None = None) -> set[str] | None:
    """Head revisions read from the migration files' `revision`/`down_revision` literals,
    without importing Alembic (a noticeable share of every start-up). None when a file does not
    spell them as plain literals: then Alembic decides."""
    revisions: set[str] = set()
    parents: set[str] = set()
    for path in sorted((versions or _versions_dir()).glob("*.py")):
        found: dict[str, object] = {}
        for node in ast.parse(path.read_text()).body:
            if isinstance(node, ast.AnnAssign | ast.Assign) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for t in targets:
                    if isinstance(t, ast.Name) and t.id in ("revision", "down_revision"):
                        try:
                            found[t.id] = ast.literal_eval(node.value)
                        except ValueError:
                            return None
        rev, down = found.get("revision"), found.get("down_revision")
        if not isinstance(rev, str):
            return None
        revisions.add(rev)
        if isinstance(down, str):
            parents.add(down)
        elif isinstance(down, tuple | list):
            parents.update(str(d) for d in down)
    return (revisions - parents) or None


async def _current(engine: AsyncEngine) -> set[str] | None:
    async with engine.connect() as conn:
        exists = await conn.scalar(
            text("SELECT 1 FROM sqlite_master WHERE type='table' AND name='alembic_version'")
        )
        if not exists:
            return None
        rows = await conn.execute(text("SELECT version_num FROM alembic_version"))
        return {r[0] for r in rows}


async def _at_head(engine: AsyncEngine) -> bool:
    """The usual start: the database is already at head, known without loading Alembic."""
    if engine.dialect.name != "sqlite":  # PostgreSQL: Alembic decides, under its lock
        return False
    heads = script_heads()
    return heads is not None and await _current(engine) == heads


async def upgrade(engine: AsyncEngine, revision: str = "head") -> None:
    if revision == "head" and await _at_head(engine):
        return
    from alembic import command

    cfg = alembic_config()

    def run(conn: Connection) -> None:
        if conn.dialect.name == "postgresql":
            # Workers starting together: one migrates, the others wait and find it done.
            conn.execute(text("SELECT pg_advisory_xact_lock(5163736)"))
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)

    async with engine.begin() as conn:
        await conn.run_sync(run)


async def pending(engine: AsyncEngine) -> list[str]:
    """Revisions not yet applied (empty when the database is up to date)."""
    if await _at_head(engine):
        return []
    from alembic.runtime.migration import MigrationContext
    from alembic.script import ScriptDirectory

    script = ScriptDirectory.from_config(alembic_config())

    def check(conn: Connection) -> list[str]:
        current = set(MigrationContext.configure(conn).get_current_heads())
        applied: set[str] = set()
        for head in current:
            applied.update(r.revision for r in script.iterate_revisions(head, "base"))
        return [r.revision for r in script.walk_revisions() if r.revision not in applied]

    async with engine.connect() as conn:
        return await conn.run_sync(check)


class SchemaMismatch(Exception):
    """The live schema lacks what the models declare: every statement touching it fails."""

    def __init__(self, differences: list[str]) -> None:
        super().__init__("; ".join(differences))
        self.differences = differences


def missing(conn: Connection, metadata: MetaData) -> list[str]:
    """The models' tables and columns the database does not have. Cheap (one PRAGMA per
    table on SQLite, no Alembic), so it runs at every start: a database whose migration stamp
    lies (it says applied what never ran) is caught before the first message fails on it."""
    inspector = inspect(conn)
    have = set(inspector.get_table_names())
    out: list[str] = []
    for table in metadata.sorted_tables:
        if table.name not in have:
            out.append(f"table {table.name}")
            continue
        columns = {c["name"] for c in inspector.get_columns(table.name)}
        out += [f"column {table.name}.{c.name}" for c in table.columns if c.name not in columns]
    return out


async def require_schema(engine: AsyncEngine, metadata: MetaData) -> None:
    """SchemaMismatch naming what is missing, after migrations ran."""
    async with engine.connect() as conn:
        found = await conn.run_sync(missing, metadata)
    if found:
        raise SchemaMismatch([f"missing {what}" for what in found])


def differences(conn: Connection, metadata: MetaData) -> list[str]:
    """Everything Alembic's autogenerate would change to make the database match the models
    (tables, columns, indexes), each as a few words; the memory index's raw-SQL tables are
    not the models' and are left out. For doctor: it loads Alembic."""
    from alembic.autogenerate import compare_metadata
    from alembic.runtime.migration import MigrationContext

    def ours(name: str | None, type_: str, parent_names: object) -> bool:
        return type_ != "table" or name in metadata.tables

    context = MigrationContext.configure(conn, opts={"include_name": ours})
    # A column's modifications come as a list of tuples; everything else as one tuple.
    steps = [
        s for d in compare_metadata(context, metadata) for s in (d if isinstance(d, list) else [d])
    ]
    absent = {s[1].name for s in steps if s[0] == "add_table" and isinstance(s[1], Table)}
    out = [
        _describe(s)
        for s in steps
        # A missing table's indexes are missing with it: said once, by the table.
        if not (s[0] == "add_index" and isinstance(s[1], Index) and s[1].table is not None
                and s[1].table.name in absent)
    ]  # fmt: skip
    return list(dict.fromkeys(out))


def _describe(step: tuple[object, ...]) -> str:
    kind = str(step[0])
    verb, _, what = kind.partition("_")
    said = "missing" if verb == "add" else "not in the models:"
    if verb in ("add", "remove") and what == "column":
        return f"{said} column {step[2]}.{_name(step[3])}"
    if verb in ("add", "remove") and what in ("table", "index", "constraint"):
        return f"{said} {what} {_name(step[1])}"
    if verb == "modify":  # (kind, schema, table, column, ...)
        return f"column {step[2]}.{step[3]}: {what} differs"
    return kind.replace("_", " ")


def _name(obj: object) -> str:
    name = obj.name if isinstance(obj, Table | Column | Index | Constraint) else None
    return str(name) if name else str(obj)


async def extras(engine: AsyncEngine, metadata: MetaData) -> list[str]:
    """The tables, views and triggers the database holds beyond what the migrations make (a
    trigger that deletes rows changes what every write does, and compare_metadata sees
    neither triggers nor views nor tables the models do not name). What the migrations make
    besides the models (the memory index's raw-SQL tables, alembic_version) is read from a
    scratch SQLite database migrated now; SQLite's own tables and a virtual table's shadow
    tables are its parts. For doctor."""
    scratch = create_engine("sqlite+aiosqlite:///:memory:")
    try:
        await upgrade(scratch)
        async with scratch.connect() as conn:
            made = await conn.run_sync(_objects)
    finally:
        await scratch.dispose()
    async with engine.connect() as conn:
        found = await conn.run_sync(_objects)
    known = made | {("table", name) for name in metadata.tables}
    return [f"not in the models: {kind} {name}" for kind, name in sorted(found - known)]


def _objects(conn: Connection) -> set[tuple[str, str]]:
    """(kind, name) of the schema's tables, views and triggers."""
    if conn.dialect.name == "postgresql":
        rows = conn.execute(
            text(
                "SELECT CASE table_type WHEN 'VIEW' THEN 'view' ELSE 'table' END, "
                "table_name::text FROM information_schema.tables "
                "WHERE table_schema = current_schema() "
                "UNION SELECT 'view', matviewname::text FROM pg_matviews "
                "WHERE schemaname = current_schema() "
                "UNION SELECT 'trigger', trigger_name::text FROM information_schema.triggers "
                "WHERE trigger_schema = current_schema()"
            )
        )
        return {(r[0], r[1]) for r in rows}
    listed = conn.execute(text("PRAGMA main.table_list")).all()
    out = {
        ("table", r[1])
        for r in listed
        if r[2] in ("table", "virtual") and not r[1].startswith("sqlite_")
    }
    out |= {("view", r[1]) for r in listed if r[2] == "view"}
    triggers = conn.execute(text("SELECT name FROM main.sqlite_master WHERE type = 'trigger'"))
    return out | {("trigger", r[0]) for r in triggers}
