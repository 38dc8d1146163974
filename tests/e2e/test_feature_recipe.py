"""CONTRIBUTING.md's recipe, followed for real: a throwaway feature with a tool, two tables,
a setting, a command, a button, a job, a doctor check, a part, a per-request hook with its
own typed state and its own rows in the record's transaction, a gate and a model wrapper,
written as one folder plus its entry in bot/features.py, in a copy of the project. Alembic
autogenerates its migration from the derived metadata, and the assembled app (the builder
`sidekick run` uses, on the fake Telegram and fake model) offers the tool, stores what it
did, answers the command in Telegram and in the terminal, runs the job and the doctor
check, calls the hook, the gate and the wrapper."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import migrated_template

ROOT = Path(__file__).resolve().parents[2]

FEATURE_PY = '''
"""Tally: the model counts things for the user; /tally shows the counts."""

from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from pydantic import BaseModel, SecretStr
from sqlalchemy import Integer, String, func, insert, select
from sqlalchemy.orm import Mapped, mapped_column

from db.conversation import RecordWrite
from db.models.base import Base
from db.models.core import User
from db.repos.core import Recipient
from tools.base import CheckResult, RequestContext, Tool, ToolCall, ToolDeps, ToolModule
from tools.chat import ChatModel, Completion, ModelWrapper
from tools.feature import (
    Answer, Button, Command, CommandCall, Feature, Host, Job, Pressed, Provide, Setup,
)
from tools.hooks import Gate, Only, RequestHooks, TurnHooks
from tools.state import Key, Slot


class TallySettings(BaseModel):
    tally_unit: str = "×"
    tally_key: SecretStr | None = None


class Tally(Base):
    __tablename__ = "tallies"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    user_id: Mapped[int] = mapped_column(Integer, index=True)
    item: Mapped[str] = mapped_column(String(200))


class TallyLog(Base):
    """One row per item a request counted, written in the transaction of its record."""

    __tablename__ = "tally_log"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    request_id: Mapped[str] = mapped_column(String(32))
    item: Mapped[str] = mapped_column(String(200))


COUNTED = Slot("tally.counted", list)  # what this request counted


class Params(BaseModel):
    item: str


def build(deps: ToolDeps) -> Tool[Params]:
    async def run(p: Params, call: ToolCall) -> str:
        async with deps.session_factory() as s, s.begin():
            s.add(Tally(user_id=call.ctx.user_id, item=p.item))
        call.ctx.state(COUNTED).append(p.item)
        return f"counted one {p.item}"

    return Tool("tally", "Counts one item for the user.", Params, run)


@dataclass
class Calls:
    """A part: the model calls the wrapper saw."""

    n: int = 0


CALLS: Key[Calls] = Key("tally.calls")


class Counting(ModelWrapper):
    def __init__(self, inner: ChatModel, seen: Calls) -> None:
        super().__init__(inner)
        self.seen = seen

    async def stream(self, *args: Any, **kwargs: Any) -> Completion:
        self.seen.n += 1
        return await self.inner.stream(*args, **kwargs)


@dataclass
class TallyTurn(TurnHooks):
    when = (COUNTED,)  # nothing to do for a request that counted nothing: never asked
    ctx: RequestContext
    written: int = 0

    def notes(self) -> str:
        counted = self.ctx.state(COUNTED)
        return f"\\n\\n(tallied: {', '.join(counted)})" if counted else ""

    def record_writes(self, ctx: RequestContext) -> list[RecordWrite]:
        new = ctx.state(COUNTED)[self.written :]
        self.written += len(new)
        rows = [{"request_id": ctx.request_id, "item": item} for item in new]
        return [RecordWrite(insert(TallyLog), rows)]


class Turns:
    async def begin(self, ctx: RequestContext) -> TurnHooks:
        return TallyTurn(ctx)


class NoForbidden:
    async def check(
        self, tool: Any, params: Any, args: dict[str, Any], call: ToolCall
    ) -> str | None:
        if args.get("item") == "forbidden":
            return "Not counted: that item may not be tallied."
        return None


async def counts(host: Host, user_id: int) -> str:
    unit = host.deps.settings_for(TallySettings).tally_unit
    async with host.deps.session_factory() as s:
        stmt = (
            select(Tally.item, func.count())
            .where(Tally.user_id == user_id)
            .group_by(Tally.item)
            .order_by(Tally.item)
        )
        rows = (await s.execute(stmt)).all()
    return ", ".join(f"{item} {unit} {n}" for item, n in rows) or "nothing"


async def tally(call: CommandCall) -> Answer:
    text = "Tally: " + await counts(call.host, call.who.user_id)
    text += f" ({call.host.part(CALLS).n} model calls)"
    return Answer(text, ((Button("Reset", "reset"),),))


async def press(call: CommandCall) -> Pressed:
    async with call.host.deps.session_factory() as s, s.begin():
        mine = select(Tally).where(Tally.user_id == call.who.user_id)
        for row in (await s.execute(mine)).scalars():
            await s.delete(row)
    return Pressed("Reset.", Answer("Tally: nothing"))


def setup() -> Setup:
    # A real feature imports its modules here (this one is a single file): what it adds,
    # and the builders that wire it to the app.
    async def calls(host: Host) -> Calls:
        return Calls()

    async def counting(host: Host, model: ChatModel) -> ChatModel:
        return Counting(model, await host.need(CALLS))

    def turns(host: Host) -> RequestHooks:
        return Turns()

    def gate(host: Host) -> Gate:
        return Only((Params,), NoForbidden())  # asked about the tally tool's calls alone

    async def report(host: Host) -> None:
        async with host.deps.session_factory() as s:
            tallied = User.id.in_(select(Tally.user_id))
            users = (await s.execute(select(User).where(tallied))).scalars()
            recipients = [Recipient(u.id, u.telegram_id, u.name) for u in users]
        for r in recipients:
            await host.deliver(r, "Today: " + await counts(host, r.user_id), False)

    async def check(host: Host) -> list[CheckResult]:
        async with host.deps.session_factory() as s:
            n = (await s.execute(select(func.count()).select_from(Tally))).scalar_one()
        return [CheckResult("tally", True, f"{n} counted")]

    return Setup(
        tools=(ToolModule("tally", build, "tally: count one item for the user."),),
        models=(Tally, TallyLog),
        commands=(Command("tally", "what I counted for you", tally),),
        press=press,
        jobs=(Job("tally-report", "send each user their counts", timedelta(days=1), report),),
        parts=(Provide(CALLS, calls),),
        wraps=(counting,),
        turns=(turns,),
        gates=(gate,),
        doctor=check,
    )


FEATURE = Feature(name="tally", settings=TallySettings, setup=setup)
'''

PROBE = """
from bot.ops.doctor import all_checks
from bot.telegram.delivery import TelegramDelivery
from bot.terminal.commands import Who, run_command
from tests.e2e.conftest import OWNER, TG
from tests.fakes.openai_server import Calls, Text


async def test_the_throwaway_feature_works_in_the_assembled_app(make_tg) -> None:
    tg: TG = await make_tg(tally_unit="x", tally_key="sk-tally-secret-1234")
    assert tg.settings.tally_unit == "x"  # its settings slice is part of the settings
    assert "sk-tally-secret-1234" in tg.settings.secrets()  # scrubbed from logs and replies
    tg.llm.add(Calls([("tally", {"item": "coffee"})]), Text("Counted."))
    await tg.send(OWNER, "count a coffee")
    # The request's hook read the tool's typed state and wrote under the answer.
    assert (await tg.reply(OWNER)).text == "Counted.\\n\\n(tallied: coffee)"
    offered = [t["function"]["name"] for t in tg.llm.requests[0]["tools"]]
    assert "tally" in offered
    assert "tally: count one item for the user." in tg.llm.requests[0]["messages"][0]["content"]
    # Its rows went in with the tool round's record.
    from sqlalchemy import select
    from tools.tally.feature import TallyLog
    async with tg.app.session_factory() as s:
        logged = (await s.execute(select(TallyLog.item, TallyLog.request_id))).all()
    assert [item for item, _ in logged] == ["coffee"] and logged[0][1]

    # The gate: the call is answered, not run.
    tg.llm.add(Calls([("tally", {"item": "forbidden"})]), Text("Fine."))
    await tg.send(OWNER, "count a forbidden thing")
    assert (await tg.reply(OWNER)).text == "Fine."
    results = [m["content"] for m in tg.llm.requests[-1]["messages"] if m["role"] == "tool"]
    assert results[-1] == "Not counted: that item may not be tallied."

    await tg.send(OWNER, "/help")
    assert "/tally — what I counted for you" in (await tg.reply(OWNER)).text
    await tg.send(OWNER, "/tally")
    shown = await tg.reply(OWNER)
    # The wrapper saw each of the four model calls (its part counts them).
    assert shown.text == "Tally: coffee x 1 (4 model calls)"
    assert shown.reply_markup["inline_keyboard"][0][0]["callback_data"] == "tally:reset"
    local = await run_command(tg.app, Who(OWNER, "Owner"), "/tally")
    assert local == "Tally: coffee x 1 (4 model calls)"  # the terminal renders the same

    jobs = await tg.app.start_features(TelegramDelivery(tg.runtime.outbox))  # as `run` does
    [run] = [run for job_id, *_, run in jobs if job_id == "tally-report"]
    await run()
    assert (await tg.reply(OWNER)).text == "Today: coffee x 1"

    [check] = [c for c in all_checks(tg.app.features) if c.__name__ == "check_tally"]
    assert [r.detail for r in await check(tg.app)] == ["1 counted"]

    await tg.press(OWNER, "tally:reset", message_id=shown.message_id)
    await tg.idle()
    [edited] = [m for m in tg.server.messages if m.message_id == shown.message_id]
    assert edited.text == "Tally: nothing"
"""


def _copy_project(dest: Path) -> None:
    skip = shutil.ignore_patterns("__pycache__", ".pytest_cache", ".mypy_cache", "data")
    for name in ("bot", "db", "tools", "scheduler", "migrations", "tests"):
        shutil.copytree(ROOT / name, dest / name, ignore=skip)
    for name in ("pyproject.toml", "alembic.ini"):
        shutil.copy(ROOT / name, dest / name)


def _add_to_list(features_py: Path) -> None:
    """The entry in bot/features.py: its import and its line in FEATURES."""
    text = features_py.read_text()
    text = text.replace(
        "\nFEATURES: tuple[Feature, ...] = (\n",
        "\nfrom tools.tally.feature import FEATURE as tally  # noqa: E402\n"
        "\nFEATURES: tuple[Feature, ...] = (\n    tally,\n",
        1,
    )
    assert "    tally,\n" in text, "bot/features.py no longer has the FEATURES list"
    features_py.write_text(text)


@pytest.mark.e2e
def test_a_feature_is_one_folder_and_one_entry_in_the_list(tmp_path: Path) -> None:
    project = tmp_path / "project"
    _copy_project(project)
    folder = project / "tools" / "tally"
    folder.mkdir()
    (folder / "__init__.py").write_text("")
    (folder / "feature.py").write_text(FEATURE_PY)
    _add_to_list(project / "bot" / "features.py")
    (project / "tests" / "e2e" / "test_probe_tally.py").write_text(PROBE)

    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("DATABASE_", "SIDEKICK"))},
        "PYTHONPATH": str(project),
    }
    schema = {"DATABASE_URL": f"sqlite+aiosqlite:///{tmp_path / 'schema.db'}"}

    def run(*args: str, **extra: str) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            [sys.executable, *args], cwd=project, env={**env, **extra}, capture_output=True,
            text=True, timeout=600,
        )  # fmt: skip
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        return done

    # The migration, as a developer makes it: the schema at head, then autogenerate. The
    # database at head is the suite's migrated template (the same migrations as the copy's,
    # which the tally folder has not touched yet): `alembic upgrade head` from nothing would
    # be one more process start.
    shutil.copyfile(migrated_template(), tmp_path / "schema.db")
    run("-m", "alembic", "revision", "--autogenerate", "-m", "tally", **schema)
    [made] = [p for p in (project / "migrations" / "versions").glob("*tally.py")]
    for table in ("tallies", "tally_log"):
        assert f"op.create_table('{table}'" in made.read_text() or (
            f'op.create_table("{table}"' in made.read_text()
        )
    run("-m", "pytest", "-q", "-p", "no:cacheprovider", "tests/e2e/test_probe_tally.py")
