"""The owner's People page: pairing requests with Allow / Deny, who is let in with Remove.
Each decision is the access feature's own (its ACCESS part's `decide`, the one /users'
buttons call): kept, in effect at once, the person told. Anyone but the owner reads the
page as one that does not exist."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from bot.access.commands import chat_id_of
from bot.access.gate import ACCESS
from bot.dashboard.html import Form, View, esc, message, page, post_form
from tools.feature import Host

VERBS = {"allow": "allowed", "deny": "denied", "remove": "removed"}
DONE = {"allowed": "Allowed", "denied": "Denied", "removed": "Removed"}


def _owner_only(view: View) -> None:
    if not view.owner:
        raise web.HTTPNotFound(text="Not found.")


async def listing(host: Host, request: web.Request, view: View) -> web.Response:
    _owner_only(view)
    access = host.part(ACCESS)
    body = []
    done, who = DONE.get(request.query.get("done", "")), request.query.get("who", "")
    if done and chat_id_of(who) is not None:
        body.append(f'<p class="notice">{done}: {esc(who)}.</p>')
    rows = await access.entries()
    waiting = [e for e in rows if e.state == "pending" and e.chat_id not in access.seed]
    body.append("<h2>Asking to talk to me</h2>")
    for e in waiting:
        what = "group" if e.kind == "group" else "id"
        buttons = post_form(view, f"/people/{e.chat_id}/allow", "Allow") + post_form(
            view, f"/people/{e.chat_id}/deny", "Deny", cls="danger"
        )
        body.append(
            f'<div class="item person" id="p{e.chat_id}"><p>{esc(e.name or "(no name)")}</p>'
            f'<div class="meta">{what} {e.chat_id} · asked {e.asked_at:%Y-%m-%d}</div>'
            f'<div class="actions">{buttons}</div></div>'
        )
    if not waiting:
        body.append('<p class="hint">Nobody is waiting.</p>')
    body.append("<h2>Let in</h2>")
    body += [
        f'<div class="item"><p>id {i}</p><div class="meta">in ALLOWED_USER_IDS (.env)</div></div>'
        for i in access.seed
    ]
    for e in rows:
        if e.state == "pending" or e.chat_id in access.seed:
            continue
        what = "group" if e.kind == "group" else "id"
        since = e.decided_at or e.asked_at
        state = "owner" if e.state == "owner" else f"since {since:%Y-%m-%d}"
        remove = (
            ""
            if e.state == "owner"
            else post_form(view, f"/people/{e.chat_id}/remove", "Remove", cls="danger")
        )
        body.append(
            f'<div class="item person" id="p{e.chat_id}"><p>{esc(e.name or "(no name)")}</p>'
            f'<div class="meta">{what} {e.chat_id} · {state}</div>'
            f'<div class="actions">{remove}</div></div>'
        )
    return page("People", "".join(body), view, active="/people")


async def decide(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    _owner_only(view)
    state = VERBS.get(request.match_info["verb"])
    chat_id = chat_id_of(request.match_info["chat_id"])
    if state is None or chat_id is None:
        return message("Not found", "There is no such request or person.", view, status=404)
    try:
        before, changed = await host.part(ACCESS).decide(
            chat_id, state, view.person.telegram_id, host.deps.clock()
        )
    except ValueError as exc:
        return message("Not changed", str(exc), view, status=400)
    if before is None:
        return message("Not found", "There is no such request or person.", view, status=404)
    if not changed:
        text = f"Already decided: {before.name or chat_id} is {before.state}."
        return message("Not changed", text, view, status=409)
    raise web.HTTPSeeOther(f"/people?{urlencode({'done': state, 'who': chat_id})}")
