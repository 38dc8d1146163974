"""The pages' frame: escaping (every value from the database or a person is escaped here or
by the page that builds it: outside text shows as text), the header, forms that carry the
CSRF token, and the security headers every response gets."""

from __future__ import annotations

import html
from collections.abc import Iterable
from dataclasses import dataclass
from zoneinfo import ZoneInfo

from aiohttp import web
from multidict import MultiDictProxy

from bot.dashboard.repo import Person
from bot.shown import shown

# A posted form as aiohttp reads it.
Form = MultiDictProxy[str | bytes | bytearray | web.FileField]
CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "base-uri 'none'; frame-ancestors 'self' https://web.telegram.org"
)
# The Mini App page alone runs scripts: ours, and Telegram's, which hands over initData.
MINIAPP_CSP = CSP + "; script-src 'self' https://telegram.org; connect-src 'self'"
HEADERS = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",  # a sign-in link's token never leaves in a Referer
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}
NAV = (
    ("/", "Today"),
    ("/memories", "Memories"),
    ("/reminders", "Reminders"),
    ("/usage", "Usage"),
    ("/sessions", "Sessions"),
    ("/code", "Code"),
)
OWNER_NAV = (
    ("/people", "People"),
    ("/groups", "Groups"),
    ("/approvals", "Approvals"),
    ("/doctor", "Doctor"),
    ("/backups", "Backups"),
)


def secure(response: web.StreamResponse) -> web.StreamResponse:
    """The security headers every answer gets: the guard adds them to what a page returns,
    and a streamed download (sent before its handler returns) to itself before it starts."""
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    return response


def esc(value: object) -> str:
    # Bidi controls (a model's name, a page's words) shown as \u202e, as in the chat.
    return html.escape(shown(str(value)), quote=True)


def esc_field(value: object) -> str:
    """A form field's value as stored: what a person edits and saves back must not come
    back rewritten (an escaped bidi control would be saved as its six characters)."""
    return html.escape(str(value), quote=True)


@dataclass(frozen=True)
class View:
    person: Person
    csrf: str
    tz: ZoneInfo
    owner: bool = False  # the bot's owner: the owner-only pages too


def owner_only(view: View) -> None:
    # Before anything is read.
    if not view.owner:
        raise web.HTTPForbidden(text="Only the bot's owner sees this page.")


def post_form(view: View, action: str, label: str, *, cls: str = "") -> str:
    klass = f' class="{esc(cls)}"' if cls else ""
    return (
        f'<form method="post" action="{esc(action)}">'
        f'<input type="hidden" name="csrf" value="{esc(view.csrf)}">'
        f"<button{klass}>{esc(label)}</button></form>"
    )


def page(
    title: str,
    body: str,
    view: View | None,
    *,
    active: str = "",
    status: int = 200,
    csp: str = CSP,
    scripts: Iterable[str] = (),
) -> web.Response:
    nav = ""
    if view is not None:
        links = " ".join(
            f'<a href="{href}"{" class=on" if href == active else ""}>{label}</a>'
            for href, label in (*NAV, *(OWNER_NAV if view.owner else ()))
        )
        who = esc(view.person.name or "you")
        nav = (
            f"<header><strong>Sidekick</strong>{links}"
            f'<span class="hint">{who}</span>{post_form(view, "/logout", "Sign out", cls="quiet")}'
            "</header>"
        )
    tags = "".join(f'<script src="{esc(src)}"></script>' for src in scripts)
    doc = (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<title>{esc(title)} · Sidekick</title><link rel="stylesheet" href="/static/app.css">'
        f"</head><body>{nav}<main><h1>{esc(title)}</h1>{body}</main>{tags}</body></html>"
    )
    response = web.Response(text=doc, status=status, content_type="text/html", charset="utf-8")
    response.headers["Content-Security-Policy"] = csp
    return response


def message(title: str, text: str, view: View | None = None, status: int = 200) -> web.Response:
    klass = "error" if status >= 400 else "notice"
    return page(title, f'<p class="{klass}">{esc(text)}</p>', view, status=status)
