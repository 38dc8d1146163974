"""The owner's People and Groups pages: Allow / Deny requests, Remove who is let in, each
through the access feature's own `decide` (what /users' buttons call)."""

from __future__ import annotations

from urllib.parse import urlencode

from aiohttp import web

from bot.access.commands import chat_id_of
from bot.access.gate import ACCESS
from bot.access.models import AccessEntry
from bot.dashboard.html import Form, View, esc, message, owner_only, page, post_form
from tools.feature import Host

VERBS = {"allow": "allowed", "deny": "denied", "remove": "removed"}


def _entry(view: View, e: AccessEntry, meta: str, buttons: list[tuple[str, str, str]]) -> str:
    forms = "".join(post_form(view, f"/people/{e.chat_id}/{verb}", label, cls=cls)
                    for verb, label, cls in buttons)  # fmt: skip
    return (
        f'<div class="item person" id="p{e.chat_id}"><p>{esc(e.name or "(no name)")}</p>'
        f'<div class="meta">{meta}</div><div class="actions">{forms}</div></div>'
    )


async def listing(host: Host, request: web.Request, view: View, *, groups: bool) -> web.Response:
    """People (`groups` False) or Groups: who asks to talk to the bot, and who is let in."""
    owner_only(view)
    access = host.part(ACCESS)
    body = []
    done, who = request.query.get("done", ""), request.query.get("who", "")
    if done in VERBS.values() and chat_id_of(who) is not None:
        body.append(f'<p class="notice">{done.capitalize()}: {esc(who)}.</p>')
    rows = [e for e in await access.entries() if (e.kind == "group") == groups]
    waiting = [e for e in rows if e.state == "pending" and e.chat_id not in access.seed]
    what = "group" if groups else "id"
    body.append("<h2>Asking to talk to me</h2>")
    decide = [("allow", "Allow", ""), ("deny", "Deny", "danger")]
    body += [
        _entry(view, e, f"{what} {e.chat_id} · asked {e.asked_at:%Y-%m-%d}", decide)
        for e in waiting
    ]
    if not waiting:
        body.append('<p class="hint">Nobody is waiting.</p>')
    body.append("<h2>Let in</h2>")
    if not groups:
        body += [
            f'<div class="item"><p>id {i}</p><div class="meta">in ALLOWED_USER_IDS (.env)</div>'
            "</div>"
            for i in access.seed
        ]
    admitted = [e for e in rows if e.state != "pending" and e.chat_id not in access.seed]
    for e in admitted:  # the owner cannot be removed
        owner, since = e.state == "owner", e.decided_at or e.asked_at
        meta = f"{what} {e.chat_id} · " + ("owner" if owner else f"since {since:%Y-%m-%d}")
        body.append(_entry(view, e, meta, [] if owner else [("remove", "Remove", "danger")]))
    if groups and not admitted:
        body.append('<p class="hint">No group is admitted.</p>')
    title = "Groups" if groups else "People"
    return page(title, "".join(body), view, active=f"/{title.lower()}")


async def decide(host: Host, request: web.Request, view: View, form: Form) -> web.Response:
    owner_only(view)
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
    home = "/groups" if chat_id < 0 else "/people"  # a person's chat id is their Telegram id
    raise web.HTTPSeeOther(f"{home}?{urlencode({'done': state, 'who': chat_id})}")
