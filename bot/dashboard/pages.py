"""The pages, each through the operation the chat command uses, scoped to the signed-in
person: an id that is not theirs reads exactly like one that does not exist."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from datetime import datetime, time, timedelta
from urllib.parse import urlencode

from aiohttp import web

from bot.approvals import repo as approvals_repo
from bot.approvals.gate import TIMEOUT_S as APPROVAL_TIMEOUT_S
from bot.dashboard.html import Form, View, esc, esc_field, message, page, post_form, secure
from bot.sessions import repo as sessions_repo
from bot.usage import repo as usage_repo
from bot.usage.commands import meter_of
from bot.usage.meter import Meter, period_starts, usd
from bot.usage.report import budget_lines, figures, usage_text
from db.repos import core as core_repo
from tools.base import ToolError
from tools.code import repo as code_repo
from tools.feature import Host, bounded, row_id
from tools.memory import repo as memory_repo
from tools.memory.models import Memory
from tools.memory.store import LAYERS, MEMORY, MemoryHit, MemoryStore
from tools.reminders import jobs
from tools.reminders import repo as schedule_repo
from tools.reminders.commands import ACTIONS, DONE, STATUS_MARK
from tools.reminders.models import ScheduledJob
from tools.reminders.parse import Fields, build_spec
from tools.reminders.times import local_text

log = logging.getLogger(__name__)

PAGE = 25
PAGES_MOST = 999_999  # the offset stays a small integer
SEARCH_MAX = 200
EXPORT_BATCH = 1000
CONTENT_MAX = 2000  # the memory tool's bound on one memory
SESSIONS = 30
TRANSCRIPT = 200  # newest messages of a session shown
USAGE_DAYS = 14
KINDS = ("reminder", "task")
WHEN_MAX = 200
WHEN_EXAMPLES = "tomorrow at 9 · in 2 hours · every weekday at 8"
CODE_DAYS = 7  # as /codestats by default


def _cut(text: str, most: int = 4000) -> str:
    return text if len(text) <= most else text[: most - 1] + "…"


def _when(when: datetime | None, view: View) -> str:
    return f"{when.astimezone(view.tz):%Y-%m-%d %H:%M}" if when else "—"


# What a write reports on the page it leads to: a word and an id in the address, never a
# text (a link someone sends could otherwise put their words in the notice).
NOTICES = {
    "saved": "Saved",
    "forgot": "Forgot",
    "pinned": "Pinned to long-term",
    "scheduled": "Scheduled",
    "edited": "Changed",
    **{action: DONE[action] for action in ACTIONS},
}


def _done(path: str, what: str, row: int) -> web.HTTPSeeOther:
    return web.HTTPSeeOther(f"{path}?{urlencode({'done': what, 'id': row})}")


def _notice(request: web.Request) -> str:
    what, row = NOTICES.get(request.query.get("done", "")), row_id(request.query.get("id", ""))
    return f'<p class="notice">{what} #{row}.</p>' if what and row is not None else ""


def _missing(what: str, request: web.Request, view: View, more: str = "") -> web.Response:
    # Another person's id reads exactly like one that does not exist.
    shown = request.match_info["id"][:12]
    return message("Not found", f"There is no {what} #{shown}{more}.", view, status=404)


def _store(host: Host) -> MemoryStore:
    store = host.maybe(MEMORY)
    if store is None:
        raise web.HTTPNotFound(text="Memory is not available.")
    return store


async def _usage_today(meter: Meter, view: View) -> str:
    day, _ = period_starts(meter.clock(), meter.tz)
    async with meter.sf() as s:
        total = await usage_repo.groups(s, since=day, user_id=view.person.user_id, by="none")
    line = figures(total[0]) if total else "nothing yet"
    budgets = await budget_lines(meter, view.person.user_id, amounts=view.owner)
    items = "".join(f"<li>{esc(b)}</li>" for b in budgets)
    return f"<p>Today: {esc(line)}</p>" + (f"<ul>{items}</ul>" if items else "")


async def _waiting(host: Host, view: View, now: datetime) -> list[str]:
    asked = await approvals_repo.log(host.deps.session_factory, view.person.user_id, 20)
    open_ = [
        d
        for d in asked
        if d.decision == approvals_repo.PENDING
        and now - d.created_at < timedelta(seconds=APPROVAL_TIMEOUT_S)
    ]
    items = [
        f'<div class="item"><p>{esc(d.tool)}: {esc(_cut(d.action, 300))}</p>'
        '<div class="meta">answer the question in the chat</div></div>'
        for d in open_
    ]
    return ["<h2>Waiting for you</h2>", *items] if items else []


async def today(host: Host, request: web.Request, view: View) -> web.Response:
    deps, uid = host.deps, view.person.user_id
    now = deps.clock()
    found = await jobs.listing(deps.session_factory, uid)
    upcoming = "".join(f'<div class="item">{esc(jobs.job_line(j, now))}</div>' for j in found[:5])
    body = await _waiting(host, view, now)
    body += ["<h2>Next reminders and tasks</h2>", upcoming or '<p class="hint">None.</p>']
    if found[5:]:
        body.append(f'<p><a href="/reminders">… and {len(found) - 5} more</a></p>')
    async with deps.session_factory() as s:
        runs, _ = await code_repo.recent_executions(s, uid, 0, 3)
    if runs:
        body.append("<h2>Last code runs</h2>")
        body += [
            f'<div class="item"><a href="/code/{r.id}">#{r.id}</a> '
            f"{_outcome(r.success, r.error_category)}"
            f' <span class="meta">{_when(r.created_at, view)} · {_ms(r.duration_ms)}</span></div>'
            for r in runs
        ]
    meter = meter_of(host)
    if meter is not None:
        body += ["<h2>Usage</h2>", await _usage_today(meter, view)]
    if (store := host.maybe(MEMORY)) is not None:
        count = (await store.page(user_id=uid, limit=1)).total
        body.append(f'<h2>Memory</h2><p><a href="/memories">{count} memories</a></p>')
    return page("Today", "".join(body), view, active="/")


def _memory_item(h: MemoryHit, view: View, *, actions: bool = True) -> str:
    cat = f" · {esc(h.category)}" if h.category else ""
    meta = (
        f"#{h.id} · {esc(h.layer)}{cat} · from {esc(h.source())} · "
        f"saved {_when(h.created_at, view)}"
    )
    if h.updated_at and h.updated_at != h.created_at:
        meta += f" · changed {_when(h.updated_at, view)}"
    buttons = ""
    if actions:
        pin = ""
        if h.layer != "long":
            pin = post_form(view, f"/memories/{h.id}/pin", "Pin to long-term", cls="quiet")
        buttons = (
            f'<div class="actions"><a class="button" href="/memories/{h.id}">Edit</a>{pin}'
            f"{post_form(view, f'/memories/{h.id}/forget', 'Forget', cls='danger')}</div>"
        )
    return f'<div class="item memory" id="m{h.id}"><p>{esc(h.content)}</p>' + (
        f'<div class="meta">{meta}</div>{buttons}</div>'
    )


def _pager(base: str, params: dict[str, str], number: int, total: int) -> str:
    pages = max(1, -(-total // PAGE))

    def link(to: int, label: str) -> str:
        return f'<a href="{base}?{esc(urlencode({**params, "page": to}))}">{label}</a>'

    links = [link(number - 1, "◀ Prev")] if number > 1 else []
    links.append(f'<span class="hint">page {number} of {pages}</span>')
    if number < pages:
        links.append(link(number + 1, "Next ▶"))
    return f'<div class="pager">{"".join(links)}</div>'


async def memories(host: Host, request: web.Request, view: View) -> web.Response:
    store, uid = _store(host), view.person.user_id
    layer = request.query.get("layer", "")
    layer = layer if layer in LAYERS else ""
    query = request.query.get("q", "").strip()[:SEARCH_MAX]
    tabs = "".join(
        f'<a href="/memories{"?layer=" + x if x else ""}"{" class=on" if x == layer else ""}>'
        f"{x or 'all'}</a>"
        for x in ("", *LAYERS)
    )
    search = (
        '<form method="get" action="/memories" role="search">'
        f'<input type="search" name="q" value="{esc_field(query)}" placeholder="Search memories" '
        f'maxlength="{SEARCH_MAX}"></form>'
    )
    body = [_notice(request), search, f'<div class="tabs">{tabs}</div>']
    if query:
        hits = await store.recall(user_id=uid, query=query, limit=PAGE)
        body.append(f'<p class="hint">{len(hits)} found for “{esc(query)}”.</p>')
        body += [_memory_item(h, view) for h in hits]
    else:
        number = bounded(request.query.get("page"), 1, PAGES_MOST) or 1
        found = await store.page(
            user_id=uid, layer=layer or None, offset=(number - 1) * PAGE, limit=PAGE
        )
        if not found.items:
            body.append('<p class="hint">No memories here.</p>')
        body += [_memory_item(h, view) for h in found.items]
        params = {"layer": layer} if layer else {}
        body.append(_pager("/memories", params, number, found.total))
        body.append(
            f'<p class="hint">{found.total} in all · export as <a href="/memories/export.json">'
            'JSON</a> or <a href="/memories/export.md">Markdown</a></p>'
        )
    return page("Memories", "".join(body), view, active="/memories")


async def export(host: Host, request: web.Request, view: View) -> web.StreamResponse:
    """Every live memory as JSON or Markdown, written a batch at a time as it is read: 100,000
    memories cost one batch, and no database session waits on the client."""
    kind, now = request.match_info["kind"], host.deps.clock()
    if kind not in ("json", "md"):
        raise web.HTTPNotFound(text="Export as .json or .md.")
    _store(host)  # memory off: a 404 now, before the download starts
    parts = (_json_export if kind == "json" else _md_export)(host, view, now)
    response = web.StreamResponse()
    response.content_type = "application/json" if kind == "json" else "text/markdown"
    response.charset = "utf-8"
    name = f"memories-{now.astimezone(view.tz):%Y-%m-%d}.{kind}"
    response.headers["Content-Disposition"] = f'attachment; filename="{name}"'
    await secure(response).prepare(request)
    try:
        async for text in parts:
            await response.write(text.encode())
    except ConnectionError:
        raise  # the client went away
    except Exception:
        # The status line has gone out: a failure now can only cut the download short, so
        # that the client sees an unfinished body rather than a file that looks whole.
        log.exception("dashboard: the export of memories failed")
        if request.transport is not None:
            request.transport.close()
        return response
    await response.write_eof()
    return response


async def _batches(
    host: Host, uid: int, now: datetime, layer: str | None = None
) -> AsyncIterator[list[Memory]]:
    after = 0
    while True:
        async with host.deps.session_factory() as s:
            batch = await memory_repo.user_batch(s, uid, now, after, EXPORT_BATCH, layer)
        if not batch:
            return
        yield batch
        after = batch[-1].id


def _stamp(when: datetime | None) -> str | None:
    return when.isoformat(timespec="seconds") if when else None


async def _json_export(host: Host, view: View, now: datetime) -> AsyncIterator[str]:
    sep = "[\n"
    async for batch in _batches(host, view.person.user_id, now):
        items = [
            json.dumps(
                {
                    "id": m.id,
                    "layer": m.layer,
                    "category": m.category,
                    "content": m.content,
                    "created_at": _stamp(m.created_at),
                    "updated_at": _stamp(m.updated_at),
                    "expires_at": _stamp(m.expires_at),
                },
                ensure_ascii=False,
            )
            for m in batch
        ]
        yield sep + ",\n".join(items)
        sep = ",\n"
    yield "[]\n" if sep == "[\n" else "\n]\n"


async def _md_export(host: Host, view: View, now: datetime) -> AsyncIterator[str]:
    uid = view.person.user_id
    total = (await _store(host).page(user_id=uid, limit=1)).total
    yield f"# Memories ({total}, {now.astimezone(view.tz):%Y-%m-%d})\n"
    for layer in LAYERS:
        head = f"\n## {layer}\n\n"
        async for batch in _batches(host, uid, now, layer):
            lines = [f"- {m.content} (#{m.id}, {_when(m.created_at, view)})\n" for m in batch]
            yield head + "".join(lines)
            head = ""


async def _own_memory(host: Host, request: web.Request, view: View) -> MemoryHit | None:
    mid = row_id(request.match_info["id"])
    if mid is None:
        return None
    return await _store(host).get(user_id=view.person.user_id, memory_id=mid)


async def memory(host: Host, request: web.Request, view: View) -> web.Response:
    found = await _own_memory(host, request, view)
    if found is None:
        return _missing("memory", request, view)
    edit = (
        f'<form method="post" action="/memories/{found.id}">'
        f'<input type="hidden" name="csrf" value="{esc(view.csrf)}">'
        f'<textarea name="content" maxlength="{CONTENT_MAX}" required>{esc_field(found.content)}'
        '</textarea><div class="actions"><button>Save</button>'
        '<a href="/memories">Back</a></div></form>'
    )
    forget = post_form(view, f"/memories/{found.id}/forget", "Forget it", cls="danger")
    body = _memory_item(found, view, actions=False) + "<h2>Edit</h2>" + edit + forget
    return page(f"Memory #{found.id}", body, view, active="/memories")


async def memory_save(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    found = await _own_memory(host, request, view)
    if found is None:
        return _missing("memory", request, view)
    content = form.get("content")
    if not isinstance(content, str) or not content.strip():
        return message("Not saved", "A memory needs some text.", view, status=400)
    if len(content) > CONTENT_MAX:
        text = f"A memory holds at most {CONTENT_MAX} characters; this has {len(content)}."
        return message("Not saved", text, view, status=400)
    await _store(host).edit(user_id=view.person.user_id, memory_id=found.id, content=content)
    raise _done("/memories", "saved", found.id)


# A memory's buttons: what the press does in the store (as /memory and the memory tool do),
# and the word the page it leads to shows. Pin: to long-term, kept for good.
MEMORY_ACTIONS: dict[str, tuple[str, Callable[[MemoryStore, int, int], Awaitable[bool]]]] = {
    "forget": ("forgot", lambda store, uid, mid: store.forget(user_id=uid, memory_id=mid)),
    "pin": ("pinned", lambda store, uid, mid: store.pin(user_id=uid, memory_id=mid)),
}


async def memory_act(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    found = await _own_memory(host, request, view)
    act = MEMORY_ACTIONS.get(request.match_info["action"])
    if found is None or act is None:
        return _missing("memory", request, view)
    done, run = act
    await run(_store(host), view.person.user_id, found.id)
    raise _done("/memories", done, found.id)


async def reminders(host: Host, request: web.Request, view: View) -> web.Response:
    deps, uid = host.deps, view.person.user_id
    now = deps.clock()
    found = await jobs.listing(deps.session_factory, uid)
    body = [
        _notice(request),
        '<form method="post" action="/reminders" class="item">'
        f'<input type="hidden" name="csrf" value="{esc(view.csrf)}">'
        + _line("text", jobs.MAX_TEXT, "What: call Anna")
        + _line("when", WHEN_MAX, f"When: {WHEN_EXAMPLES}")
        + '<div class="actions"><select name="kind"><option value="reminder">reminder</option>'
        '<option value="task">task (I do it and send the answer)</option></select>'
        "<button>Schedule</button></div></form>",
        f'<p class="hint">Times in {esc(view.tz.key)}.</p>',
    ]
    for j in found:
        toggle = "resume" if j.status == "paused" else "pause"
        buttons = (
            []
            if j.status == "done"  # came due, waits for delivery: only cancelling is left
            else [
                f'<a class="button" href="/reminders/{j.id}">Edit</a>',
                post_form(view, f"/reminders/{j.id}/{toggle}", toggle.capitalize(), cls="quiet"),
            ]
        )
        buttons.append(post_form(view, f"/reminders/{j.id}/cancel", "Cancel", cls="danger"))
        body.append(
            f'<div class="item reminder" id="r{j.id}"><p>{esc(jobs.job_line(j, now))}</p>'
            f'<div class="actions">{"".join(buttons)}</div></div>'
        )
    if not found:
        body.append('<p class="hint">No reminders or tasks. Ask for one in the chat.</p>')
    async with deps.session_factory() as s:
        runs = await schedule_repo.history(s, uid, 15)
    if runs:
        rows = "".join(
            f"<tr><td>{STATUS_MARK.get(r.status, '?')} {esc(r.status)}</td><td>#{r.job_id}</td>"
            f"<td>{esc(local_text(r.due_at, view.tz, now))}</td><td>{esc(r.text[:80])}</td>"
            f"<td>{esc((r.error or '')[:120]) if r.status != 'sent' else ''}</td></tr>"
            for r in runs
        )
        body.append(f"<h2>Delivered lately</h2><table>{rows}</table>")
    return page("Reminders", "".join(body), view, active="/reminders")


def _line(name: str, most: int, placeholder: str, *, required: bool = True) -> str:
    need = " required" if required else ""
    return (
        f'<p><input type="search" name="{name}" maxlength="{most}"{need} '
        f'placeholder="{esc(placeholder)}"></p>'
    )


async def _own_job(host: Host, request: web.Request, view: View) -> ScheduledJob | None:
    jid = row_id(request.match_info["id"])
    if jid is None:
        return None
    async with host.deps.session_factory() as s:
        job = await schedule_repo.user_job(s, view.person.user_id, jid)
    return job if job is not None and job.status in schedule_repo.LIVE else None


async def reminder(host: Host, request: web.Request, view: View) -> web.Response:
    job = await _own_job(host, request, view)
    if job is None:
        return _missing("reminder", request, view, " to change")
    now = host.deps.clock()
    keep = f"New time, e.g. {WHEN_EXAMPLES} (empty: keep it)"
    form = (
        f'<form method="post" action="/reminders/{job.id}">'
        f'<input type="hidden" name="csrf" value="{esc(view.csrf)}">'
        f'<textarea name="text" maxlength="{jobs.MAX_TEXT}" required>'
        f"{esc_field(job.text)}</textarea>"
        + _line("when", WHEN_MAX, keep, required=False)
        + '<div class="actions"><button>Save</button><a href="/reminders">Back</a></div></form>'
    )
    body = (
        f'<div class="item reminder"><p>{esc(jobs.job_line(job, now))}</p></div>'
        f'<h2>Change</h2>{form}<p class="hint">Times in {esc(view.tz.key)}.</p>'
    )
    return page(f"Reminder #{job.id}", body, view, active="/reminders")


async def reminder_save(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    job = await _own_job(host, request, view)
    if job is None:
        return _missing("reminder", request, view, " to change")
    text, when = form.get("text"), form.get("when", "")
    if not isinstance(text, str) or not isinstance(when, str):
        return message("Not changed", "Say what, and when (or leave the time).", view, 400)
    now = host.deps.clock()
    try:
        spec = build_spec(Fields(), when[:WHEN_MAX], now, view.tz) if when.strip() else None
        await jobs.edit(
            host.deps.session_factory, user_id=view.person.user_id, job_id=job.id, now=now,
            text=text, spec=spec, words=when[:WHEN_MAX],
        )  # fmt: skip
    except ToolError as exc:
        return message("Not changed", str(exc), view, status=400)
    raise _done("/reminders", "edited", job.id)


async def reminder_create(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    text, when, kind = form.get("text"), form.get("when"), form.get("kind")
    if not isinstance(text, str) or not isinstance(when, str) or kind not in KINDS:
        return message("Not scheduled", "Say what, when, and whether it is a task.", view, 400)
    now = host.deps.clock()
    try:
        spec = build_spec(Fields(), when[:WHEN_MAX], now, view.tz)
        job = await jobs.create(
            host.deps.session_factory, user_id=view.person.user_id, kind=str(kind), text=text,
            words=when[:WHEN_MAX], spec=spec, now=now,
        )  # fmt: skip
    except ToolError as exc:
        return message("Not scheduled", str(exc), view, status=400)
    raise _done("/reminders", "scheduled", job.id)


async def reminder_change(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    action, job_id = request.match_info["action"], row_id(request.match_info["id"])
    change = ACTIONS.get(action)
    if change is None or job_id is None:
        return message("Not found", "There is no such reminder.", view, status=404)
    deps = host.deps
    try:
        job = await jobs.change(
            deps.session_factory,
            user_id=view.person.user_id,
            job_id=job_id,
            action=change,
            now=deps.clock(),
        )
    except ToolError as exc:
        return message("Not changed", str(exc), view, status=404)
    raise _done("/reminders", action, job.id)


def _bars(days: list[tuple[str, int]]) -> str:
    # Drawn here: no script, no image file.
    top = max((n for _, n in days), default=0) or 1
    width, height, bar = 24 * len(days), 120, 18
    rects = "".join(
        f'<rect x="{i * 24 + 3}" y="{100 - 95 * n // top}" width="{bar}" height="{95 * n // top}">'
        f"<title>{esc(day)}: {n:,} tokens</title></rect>"
        f'<text x="{i * 24 + 3}" y="114">{esc(day[-2:])}</text>'
        for i, (day, n) in enumerate(days)
    )
    return (
        f'<svg class="bars" role="img" aria-label="tokens per day" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}">{rects}</svg>'
    )


async def usage(host: Host, request: web.Request, view: View) -> web.Response:
    meter = meter_of(host)
    if meter is None:
        return message("Usage", "Usage recording is off.", view)
    uid, now = view.person.user_id, meter.clock()
    today, _ = period_starts(now, meter.tz)
    # Midnights of the last days in the meter's zone (wall clock: a DST day is 23 or 25 h).
    starts = [
        datetime.combine(today.date() - timedelta(days=n), time(), meter.tz)
        for n in range(USAGE_DAYS - 1, -1, -1)
    ]
    async with meter.sf() as s:
        days = await usage_repo.daily(s, uid, starts)
    table = "".join(
        f'<tr><td>{at:%Y-%m-%d}</td><td class="n">{tokens:,}</td><td class="n">{usd(cost)}</td>'
        "</tr>"
        for at, (tokens, cost) in reversed(list(zip(starts, days, strict=True)))
        if tokens
    )
    body = [
        f"<pre>{esc(await usage_text(meter, uid))}</pre>",
        f"<h2>Tokens per day (last {USAGE_DAYS} days)</h2>",
        _bars([(f"{at:%Y-%m-%d}", tokens) for at, (tokens, _) in zip(starts, days, strict=True)]),
        f"<table><tr><th>Day</th><th>Tokens</th><th>Cost</th></tr>{table}</table>",
    ]
    return page("Usage", "".join(body), view, active="/usage")


def _outcome(success: bool, category: str | None) -> str:
    return "ok" if success else f"failed ({esc(category or 'error')})"


def _ms(value: float | None) -> str:
    return "—" if value is None else f"{value / 1000:.1f} s" if value >= 1000 else f"{value:.0f} ms"


async def code(host: Host, request: web.Request, view: View) -> web.Response:
    deps, uid = host.deps, view.person.user_id
    number = bounded(request.query.get("page"), 1, PAGES_MOST) or 1
    since = deps.clock() - timedelta(days=CODE_DAYS)
    async with deps.session_factory() as s:
        stats = await code_repo.stats(s, uid, since)
        runs, total = await code_repo.recent_executions(s, uid, (number - 1) * PAGE, PAGE)
    body = [
        f"<p>Last {CODE_DAYS} days: {stats.total} runs, {stats.succeeded} succeeded, "
        f"{stats.failed} failed · average {_ms(stats.avg_ms)}, p95 {_ms(stats.p95_ms)}</p>"
    ]
    if stats.categories:
        rows = "".join(
            f'<tr><td>{esc(c)}</td><td class="n">{n}</td></tr>' for c, n in stats.categories
        )
        body.append(f"<h2>Failures by kind</h2><table>{rows}</table>")
    body.append("<h2>Runs</h2>")
    for r in runs:
        outcome = _outcome(r.success, r.error_category)
        first = _cut(deps.scrub(r.code.strip().splitlines()[0] if r.code.strip() else ""), 120)
        body.append(
            f'<div class="item"><a href="/code/{r.id}">#{r.id}</a> {outcome}'
            f'<div class="meta">{_when(r.created_at, view)} · exit {esc(r.exit_code)} · '
            f"{_ms(r.duration_ms)} · sandbox {esc(r.sandbox_mode or '?')}</div>"
            f"<p><code>{esc(first)}</code></p></div>"
        )
    if not runs:
        body.append('<p class="hint">No code runs.</p>')
    body.append(_pager("/code", {}, number, total))
    return page("Code runs", "".join(body), view, active="/code")


async def code_run(host: Host, request: web.Request, view: View) -> web.Response:
    deps, rid = host.deps, row_id(request.match_info["id"])
    async with deps.session_factory() as s:
        run = await code_repo.get_execution(s, rid, view.person.user_id) if rid else None
    if run is None:
        return _missing("code run", request, view)
    outcome = "succeeded" if run.success else f"failed ({run.error_category or 'error'})"
    cut = " (cut)"
    parts = [
        f'<p class="meta">{_when(run.created_at, view)} · {esc(outcome)} · exit '
        f"{esc(run.exit_code)} · {_ms(run.duration_ms)} of {_ms(run.timeout_ms)} · sandbox "
        f"{esc(run.sandbox_mode or '?')}</p>",
        f"<h2>Code</h2><pre>{esc(_cut(deps.scrub(run.code), 20_000))}</pre>",
        f"<h2>Output{cut if run.stdout_truncated else ''}</h2>"
        f"<pre>{esc(_cut(deps.scrub(run.stdout), 20_000))}</pre>",
    ]
    if run.stderr:
        parts.append(
            f"<h2>Errors{cut if run.stderr_truncated else ''}</h2>"
            f"<pre>{esc(_cut(deps.scrub(run.stderr), 20_000))}</pre>"
        )
    return page(f"Code run #{run.id}", "".join(parts), view, active="/code")


async def sessions(host: Host, request: web.Request, view: View) -> web.Response:
    async with host.deps.session_factory() as s:
        found = await sessions_repo.recent_sessions(s, view.person.user_id, SESSIONS)
    items = []
    for line in found:
        state = f"ended {_when(line.ended_at, view)}" if line.ended_at else "open"
        summary = f"<p>{esc(line.summary)}</p>" if line.summary else ""
        items.append(
            f'<div class="item"><a href="/sessions/{line.session_id}">{esc(line.name)}</a>'
            f'<div class="meta">started {_when(line.started_at, view)} · {state} · '
            f"{line.messages} messages</div>{summary}</div>"
        )
    body = "".join(items) or '<p class="hint">No sessions yet.</p>'
    hint = f'<p class="hint">The newest {SESSIONS}.</p>' if len(found) == SESSIONS else ""
    return page("Sessions", body + hint, view, active="/sessions")


async def transcript(host: Host, request: web.Request, view: View) -> web.Response:
    sid = row_id(request.match_info["id"])
    async with host.deps.session_factory() as s:
        chat = await sessions_repo.get_session(s, sid) if sid is not None else None
        if chat is None or chat.user_id != view.person.user_id:
            return _missing("session", request, view)
        messages = await core_repo.session_messages(s, chat.id, TRANSCRIPT)
    items = []
    for m in messages:
        calls = ""
        if m.tool_calls:
            calls = (
                f'<div class="meta">tool calls: {esc(_cut(host.deps.scrub(m.tool_calls)))}</div>'
            )
        if not m.content and not calls:
            continue
        items.append(
            f'<div class="item"><div class="meta">{esc(m.role)} · {_when(m.created_at, view)}</div>'
            f"<p>{esc(_cut(host.deps.scrub(m.content or '')))}</p>{calls}</div>"
        )
    cut = len(messages) == TRANSCRIPT
    head = f'<p class="hint">The newest {TRANSCRIPT} messages.</p>' if cut else ""
    return page(chat.name, head + "".join(items), view, active="/sessions")
