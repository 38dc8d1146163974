"""`sidekick doctor`: checks every part and prints ok / fail with the fix for each fail."""

from __future__ import annotations

import sys
from collections.abc import Awaitable, Callable

from sqlalchemy import text
from sqlalchemy.engine import make_url

from bot.app import App, build_app
from bot.config import HOW_TO_SET, Settings
from bot.features import FEATURES, metadata
from bot.ops.cli import check_operations
from bot.ops.preflight import sqlite_file
from db.engine import is_postgres, sqlite_module
from db.migrate import differences, extras, pending
from tools.base import CheckResult
from tools.feature import Doctor as FeatureDoctor
from tools.feature import Feature

Check = Callable[[App], Awaitable[list[CheckResult]]]


async def check_settings(app: App) -> list[CheckResult]:
    s = app.settings
    out = [CheckResult("settings", True, f"model {s.llm_model or '?'} at {s.llm_base_url}")]
    # A .env from an older release: each former name, and what it was read as. It works, so
    # the line is no failure; it says what to write instead.
    out += [CheckResult("former setting", True, line) for line in s.renamed]
    for name in ("llm_model", "telegram_bot_token"):
        if not getattr(s, name):
            out.append(CheckResult(name.upper(), False, "not set", HOW_TO_SET[name]))
    return out


async def check_database(app: App) -> list[CheckResult]:
    module = sqlite_module()
    pg = is_postgres(app.engine)
    probe = (
        "select current_setting('server_version'), extversion from pg_extension "
        "where extname = 'vector'"
        if pg
        else "select sqlite_version(), vec_version()"
    )
    try:
        async with app.engine.connect() as conn:
            row = (await conn.execute(text(probe))).one()
        todo = await pending(app.engine)
    except Exception as exc:
        fix = "check DATA_DIR / DATABASE_URL and file permissions"
        return [CheckResult("database", False, f"{type(exc).__name__}: {exc}", fix)]
    if pg:
        vectors = CheckResult("pgvector", True, f"pgvector {row[1]} on PostgreSQL {row[0]}")
    else:
        found = f"vec {row[1]} on SQLite {row[0]} via {module.__name__}"
        vectors = CheckResult("sqlite-vec", True, found)
    if todo:
        migrations = CheckResult("migrations", False, f"pending: {todo}", "run `sidekick migrate`")
    else:
        migrations = await schema_check(app)
    path = sqlite_file(app.settings)  # the file a person can look for, or the URL
    if path is None:  # a server URL may hold a password: masked
        where = make_url(app.settings.db_url).render_as_string()
    else:
        where = f"{path} ({'exists' if path.exists() else 'new'})"
    return [CheckResult("database", True, where), vectors, migrations]


async def schema_check(app: App) -> CheckResult:
    """All migrations recorded as applied, and the live schema what the models declare
    (a database whose stamp lies said "up to date" while every message failed), with no
    table, view or trigger beside what the migrations make (a trigger that deleted memories
    passed as "the schema matches")."""
    models = metadata(app.features)
    async with app.engine.connect() as conn:
        found = await conn.run_sync(differences, models)
    found += await extras(app.engine, models)
    if not found:
        return CheckResult("migrations", True, "up to date; the schema matches the models")
    shown = "; ".join(found[:8]) + (f"; and {len(found) - 8} more" if len(found) > 8 else "")
    fix = "restore a backup made by this version (`sidekick restore`), or report these lines"
    return CheckResult("migrations", False, f"applied, but the schema differs: {shown}", fix)


def llm_hint(exc: Exception, base_url: str) -> tuple[str, str]:
    """What went wrong with the model endpoint, and the question a person should ask next."""
    from bot.llm.wire import APIConnectionError, APIStatusError, APITimeoutError

    path = "check LLM_BASE_URL"  # where a 404 or another API's answer points
    if not base_url.rstrip("/").endswith("/v1"):
        path = f"wrong path: does LLM_BASE_URL ({base_url}) end in /v1?"
    if isinstance(exc, APIConnectionError):
        kind = "timed out" if isinstance(exc, APITimeoutError) else "cannot connect"
        return f"{kind} to {base_url}", "is the server running and LLM_BASE_URL right?"
    if isinstance(exc, APIStatusError):
        status = exc.status_code
        if status in (401, 403):
            return f"HTTP {status}: the key was refused", "check LLM_API_KEY"
        if status == 404:
            return "HTTP 404 for /models", path
        return f"HTTP {status}", "check LLM_BASE_URL and LLM_API_KEY"
    # A 200 that is not the OpenAI API (an HTML page, another JSON shape).
    return f"not an OpenAI-compatible answer ({type(exc).__name__})", path


async def check_llm(app: App) -> list[CheckResult]:
    try:
        models = await app.llm.list_models()
    except Exception as exc:
        detail, fix = llm_hint(exc, app.settings.llm_base_url)
        return [CheckResult("LLM endpoint", False, detail, fix)]
    model = app.settings.llm_model
    known = model in models or not models
    detail = f"{len(models)} models listed"
    shown = ", ".join(sorted(models)[:12]) + (" …" if len(models) > 12 else "")
    found = model if known else f"model {model!r} not found"
    return [
        CheckResult("LLM endpoint", True, detail),
        CheckResult("LLM_MODEL", known, found, f"these exist: {shown}"),
    ]


async def check_telegram(app: App) -> list[CheckResult]:
    token = app.settings.telegram_bot_token
    if token is None:
        return []
    url = f"{app.settings.telegram_api_url}/bot{token.get_secret_value()}/getMe"
    try:
        resp = await app.http.get(url)
        data = resp.json()
    except Exception as exc:
        fix = "check TELEGRAM_API_URL and the network"
        return [CheckResult("Telegram", False, type(exc).__name__, fix)]
    if not data.get("ok"):
        detail = f"getMe: {data.get('description', resp.status_code)}"
        fix = "the token is wrong or revoked: get a new one from @BotFather"
        return [CheckResult("Telegram", False, detail, fix)]
    return [CheckResult("Telegram", True, f"@{data['result'].get('username')}")]


def feature_check(feature: Feature, check: FeatureDoctor) -> Check:
    """A feature's own doctor check (declared in its Feature), run on the app."""

    async def run(app: App) -> list[CheckResult]:
        return await check(app)

    run.__name__ = f"check_{feature.name}"  # what a crash line names
    return run


def all_checks(features: tuple[Feature, ...] = FEATURES) -> list[Check]:
    """Every check, in order: the app's own, then what each listed feature declares."""
    return [
        check_settings,
        check_database,
        check_llm,
        check_telegram,
        *(feature_check(f, d) for f in features if (d := f.adds.doctor) is not None),
        check_operations,  # .env permissions, backups
    ]


async def check_all(app: App) -> list[CheckResult]:
    """Every check's results on `app` (`sidekick doctor`'s, the dashboard's for the running
    bot); a check that crashes is one failed line."""
    results: list[CheckResult] = []
    for check in all_checks(app.features):
        try:
            results.extend(await check(app))
        except Exception as exc:
            results.append(CheckResult(check.__name__, False, f"crashed: {exc!r}"))
    return results


def format_table(results: list[CheckResult]) -> str:
    width = max((len(r.name) for r in results), default=10)
    lines = []
    for r in results:
        mark = "ok  " if r.ok else "FAIL"
        line = f"{mark}  {r.name.ljust(width)}  {r.detail}"
        if not r.ok and r.fix:
            line += f"\n      {' ' * width}  fix: {r.fix}"
        lines.append(line)
    return "\n".join(lines)


def database_was_missing(settings: Settings) -> CheckResult | None:
    """Before the app opens (and so creates) the database: a SQLite file that is missing
    from a data folder that holds other things was deleted (or DATA_DIR moved)."""
    path = sqlite_file(settings)
    if path is None or path.exists() or not path.parent.is_dir() or not any(path.parent.iterdir()):
        return None  # there, or a first start
    return CheckResult(
        "database file",
        False,
        f"{path} was missing (a new empty one was made now); the data folder is not new",
        "restore it from a backup; a bot still running writes to the deleted file: copy it "
        "back from /proc/<pid>/fd before stopping the bot",
    )


async def run_doctor(settings: Settings, fix: bool = False) -> int:
    missing = database_was_missing(settings)
    fixed: list[CheckResult] = []
    if fix:  # first, so the checks see the result
        from bot.ops.doctor_fix import apply_fixes

        fixed = await apply_fixes(settings)
    app = await build_app(settings, check_schema=False)  # schema_check reports it in full
    results: list[CheckResult] = [missing] if missing is not None else []
    results += fixed
    try:
        results += await check_all(app)
    finally:
        await app.close()
    print(format_table(results))
    failed = sum(not r.ok for r in results)
    print(f"\n{len(results) - failed} ok, {failed} failed", file=sys.stderr)
    return 1 if failed else 0
