"""The owner's approvals (revoke an "always"), doctor and backups pages. The doctor and the
backups are handed in by what runs the app (bot/ops/operator.py); without them the page says so."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from bot.approvals import repo as approvals_repo
from bot.approvals.commands import COVERS
from bot.dashboard.html import Form, View, esc, message, owner_only, page, post_form
from bot.errors import SidekickError
from bot.ops.operator import OPERATOR, Operator
from tools.feature import Host, row_id


def _operator(host: Host) -> Operator:
    operator = host.maybe(OPERATOR)
    if operator is None:
        text = "The doctor and backups are there when the bot runs as `sidekick run`."
        raise web.HTTPServiceUnavailable(text=text)
    return operator


async def approvals(host: Host, request: web.Request, view: View) -> web.Response:
    owner_only(view)
    body = []
    # An id in the address, never a text: a link someone sends cannot word the notice.
    revoked = row_id(request.query.get("revoked", ""))
    if revoked is not None:
        body.append(f'<p class="notice">Revoked #{revoked}: that tool asks again.</p>')
    lines = await approvals_repo.everyones_grants(host.deps.session_factory)
    body.append('<p class="hint">Tools allowed for good (“Always”): they run without asking.</p>')
    for line in lines:
        g = line.grant
        who = f"{line.name or '(no name)'} (id {line.telegram_id or 'local'})"
        body.append(
            f'<div class="item grant" id="g{g.id}"><p>{esc(g.tool)}</p>'
            f'<div class="meta">{esc(who)} · since {g.created_at:%Y-%m-%d} · '
            f'{COVERS[g.scheduled]}</div><div class="actions">'
            f"{post_form(view, f'/approvals/{g.id}/revoke', 'Revoke', cls='danger')}</div></div>"
        )
    if not lines:
        body.append('<p class="hint">No tool is allowed for good.</p>')
    return page("Approvals", "".join(body), view, active="/approvals")


async def revoke(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    owner_only(view)
    grant_id = row_id(request.match_info["id"])
    sf = host.deps.session_factory
    line = next(
        (x for x in await approvals_repo.everyones_grants(sf) if x.grant.id == grant_id), None
    )
    # The revoke `/approvals revoke <tool>` makes, for the grant's own person.
    if line is None or not await approvals_repo.revoke(
        sf, line.user_id, view.person.telegram_id, line.grant.tool, host.deps.clock()
    ):
        return message("Not found", "That grant is gone already.", view, status=404)
    raise web.HTTPSeeOther(f"/approvals?{urlencode({'revoked': line.grant.id})}")


async def doctor(host: Host, request: web.Request, view: View) -> web.Response:
    owner_only(view)
    results = await _operator(host).doctor()
    scrub = host.deps.scrub
    rows = "".join(
        f'<tr class="{"ok" if r.ok else "fail"}"><td>{"ok" if r.ok else "FAIL"}</td>'
        f"<td>{esc(scrub(r.name))}</td><td>{esc(scrub(r.detail))}"
        + (f'<div class="meta">fix: {esc(scrub(r.fix))}</div>' if not r.ok and r.fix else "")
        + "</td></tr>"
        for r in results
    )
    failed = sum(not r.ok for r in results)
    body = (
        f"<p>{len(results) - failed} ok, {failed} failed.</p><table>{rows}</table>"
        '<p class="hint">The same checks as <code>sidekick doctor</code>; fixes are made there '
        "(<code>sidekick doctor --fix</code>).</p>"
    )
    return page("Doctor", body, view, active="/doctor")


async def backups(host: Host, request: web.Request, view: View) -> web.Response:
    owner_only(view)
    found = _operator(host).backups()
    made = request.query.get("made", "")
    body = []
    if made in (p.name for p in found):  # a name the address carries is shown only if real
        body.append(f'<p class="notice">Made and verified: {esc(made)}.</p>')
    body.append(post_form(view, "/backups", "Make a backup now"))
    body.append(
        '<p class="hint">The database and the data folder in one archive, as '
        "<code>sidekick backup --verify</code> makes it; it holds every conversation: keep "
        "the download safe.</p>"
    )
    for path in reversed(found):
        size = path.stat().st_size
        body.append(
            f'<div class="item backup"><a href="/backups/{esc(path.name)}">{esc(path.name)}</a>'
            f' <span class="meta">{size / 1_048_576:.1f} MB</span></div>'
        )
    if not found:
        body.append('<p class="hint">No backup yet.</p>')
    return page("Backups", "".join(body), view, active="/backups")


async def backup_make(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    owner_only(view)
    try:
        made = await _operator(host).backup()
    except SidekickError as exc:  # BackupError: no pg_dump, a damaged database
        return message("No backup", str(exc), view, status=500)
    raise web.HTTPSeeOther(f"/backups?{urlencode({'made': made.name})}")


async def backup_file(host: Host, request: web.Request, view: View) -> web.StreamResponse:
    """One of the listed archives, by its exact name: nothing else is served from here."""
    owner_only(view)
    name = request.match_info["name"]
    path = next((p for p in _operator(host).backups() if p.name == name), None)
    if path is None:
        raise web.HTTPNotFound(text="There is no such backup.")
    return web.FileResponse(path, headers={
        "Content-Type": "application/gzip",
        "Content-Disposition": f'attachment; filename="{path.name}"',
    })  # fmt: skip
