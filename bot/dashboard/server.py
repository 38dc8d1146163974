"""The dashboard's HTTP server (aiohttp) in the bot's process: sign-in, the session cookie,
the CSRF check on every write, bounded forms, and the pages. Nothing of the chat's path
passes through here."""

from __future__ import annotations

import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import datetime
from functools import partial
from pathlib import Path
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from aiohttp import web

from bot.dashboard import owner, pages, people, repo
from bot.dashboard.auth import SESSION_TTL, InitDataError, Tokens, csrf_of, init_data_user, same
from bot.dashboard.html import MINIAPP_CSP, Form, View, esc, message, page, secure
from bot.dashboard.part import Dashboard
from bot.dashboard.repo import Person
from bot.dashboard.settings import DashboardSettings
from tools.admission import ADMISSION
from tools.feature import Host

log = logging.getLogger(__name__)

COOKIE = "sidekick_dashboard"
MAX_FORM = 64 * 1024  # a memory is at most 2000 characters: any form fits many times over
ARGUMENTS_KEPT = 4000  # of a change's fields in its audit row
STATIC = Path(__file__).parent / "static"
ASSETS = {"app.css": "text/css", "miniapp.js": "text/javascript"}
TELEGRAM_JS = "https://telegram.org/js/telegram-web-app.js"

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
Read = Callable[[Host, web.Request, View], Awaitable[web.StreamResponse]]
Write = Callable[[Host, web.Request, View, Form], Awaitable[web.Response]]


def _zone(person: Person, default: ZoneInfo) -> ZoneInfo:
    try:
        return ZoneInfo(person.timezone) if person.timezone else default
    except (ZoneInfoNotFoundError, ValueError):
        return default


class Site:
    def __init__(self, host: Host, settings: DashboardSettings, tokens: Tokens) -> None:
        self.host = host
        self.settings = settings
        self.tokens = tokens
        self.secure = settings.base_url().startswith("https://")  # cookies only over https

    def routes(self) -> list[web.RouteDef]:
        """Every page, each behind the guard: the same routes on the dashboard's own server
        and on the webhook's (whose other routes are not the dashboard's to guard)."""
        table: list[tuple[str, str, Handler]] = [
            ("GET", "/login", self.login_page),
            ("POST", "/login", self.login),
            ("GET", "/miniapp", self.miniapp),
            ("POST", "/auth/webapp", self.webapp),
            ("POST", "/logout", self.write(self.logout)),
            ("GET", "/static/{name}", self.static),
            ("GET", "/", self.read(pages.today)),
            ("GET", "/memories", self.read(pages.memories)),
            ("GET", "/memories/export.{kind}", self.read(pages.export)),
            ("GET", "/memories/{id}", self.read(pages.memory)),
            ("POST", "/memories/{id}", self.write(pages.memory_save)),
            ("POST", "/memories/{id}/{action}", self.write(pages.memory_act)),
            ("GET", "/reminders", self.read(pages.reminders)),
            ("POST", "/reminders", self.write(pages.reminder_create)),
            ("GET", "/reminders/{id}", self.read(pages.reminder)),
            ("POST", "/reminders/{id}", self.write(pages.reminder_save)),
            ("POST", "/reminders/{id}/{action}", self.write(pages.reminder_change)),
            ("GET", "/usage", self.read(pages.usage)),
            ("GET", "/code", self.read(pages.code)),
            ("GET", "/code/{id}", self.read(pages.code_run)),
            ("GET", "/sessions", self.read(pages.sessions)),
            ("GET", "/sessions/{id}", self.read(pages.transcript)),
            ("GET", "/people", self.read(partial(people.listing, groups=False))),
            ("GET", "/groups", self.read(partial(people.listing, groups=True))),
            ("POST", "/people/{chat_id}/{verb}", self.write(people.decide)),
            ("GET", "/approvals", self.read(owner.approvals)),
            ("POST", "/approvals/{id}/revoke", self.write(owner.revoke)),
            ("GET", "/doctor", self.read(owner.doctor)),
            ("GET", "/backups", self.read(owner.backups)),
            ("POST", "/backups", self.write(owner.backup_make)),
            ("GET", "/backups/{name}", self.read(owner.backup_file)),
        ]
        return [web.route(method, path, self.guarded(handler)) for method, path, handler in table]

    def guarded(self, handler: Handler) -> Handler:
        """Security headers on every answer; a form over the bound refused before it is
        read; any failure one page, logged, the server going on."""

        async def run(request: web.Request) -> web.StreamResponse:
            response: web.StreamResponse
            if (request.content_length or 0) > MAX_FORM:
                response = self._too_large()
            else:
                try:
                    response = await handler(request)
                except web.HTTPRequestEntityTooLarge:
                    response = self._too_large()
                except web.HTTPException as exc:
                    if exc.status >= 400:
                        response = message(exc.reason, exc.text or exc.reason, status=exc.status)
                    else:
                        response = exc
                except Exception:
                    log.exception("dashboard: %s %s failed", request.method, request.path)
                    response = message("Error", "Something went wrong; the log has the details.",
                                       status=500)  # fmt: skip
            return secure(response)

        return run

    def _too_large(self) -> web.Response:
        text = f"The form is too large: at most {MAX_FORM // 1024} KB is accepted."
        return message("Too large", text, status=413)

    async def _view(self, request: web.Request) -> View | None:
        session = request.cookies.get(COOKIE, "")
        person = await self.tokens.person(session) if session else None
        if person is None:
            return None
        # The access feature answers who the owner is; without it, nobody is.
        admission = self.host.maybe(ADMISSION)
        owner = (
            person.telegram_id is not None
            and admission is not None
            and await admission.owner() == person.telegram_id
        )
        return View(person, csrf_of(session), _zone(person, self.host.deps.tz), owner)

    def _signed_out(self) -> web.Response:
        text = "You are not signed in. Send /dashboard to the bot in a private chat for a link."
        return message("Sign in", text, status=401)

    def read(self, handler: Read) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def run(request: web.Request) -> web.StreamResponse:
            view = await self._view(request)
            if view is None:
                return self._signed_out()
            return await handler(self.host, request, view)

        return run

    def write(self, handler: Write) -> Callable[[web.Request], Awaitable[web.Response]]:
        async def run(request: web.Request) -> web.Response:
            view = await self._view(request)
            if view is None:
                return self._signed_out()
            form = await request.post()
            token = form.get("csrf")
            if not isinstance(token, str) or not same(token, view.csrf):
                text = "This form is out of date or came from another site: reload the page."
                return message("Refused", text, view, status=403)
            started, status = time.perf_counter(), 500
            try:
                response = await handler(self.host, request, view, form)
                status = response.status
                return response
            except web.HTTPException as exc:
                status = exc.status
                raise
            finally:
                await self._record(request, view, form, status, time.perf_counter() - started)

        return run

    async def _record(
        self, request: web.Request, view: View, form: Form, status: int, seconds: float
    ) -> None:
        """A change is recorded as a chat's tool call is (tool "dashboard"): the page, the
        form's fields but its token, secrets masked, and how it ended."""
        fields = {k: v for k, v in form.items() if k != "csrf" and isinstance(v, str)}
        arguments = json.dumps({"action": request.path, **fields}, ensure_ascii=False)
        deps = self.host.deps
        try:
            async with deps.session_factory() as s, s.begin():
                await repo.record_change(
                    s, view.person.user_id, f"dashboard-{uuid.uuid4().hex[:16]}",
                    deps.scrub(arguments)[:ARGUMENTS_KEPT], f"HTTP {status}", status < 400,
                    seconds * 1000, deps.clock(),
                )  # fmt: skip
        except Exception:  # the change is made: its record must not undo the answer
            log.exception("dashboard: could not record %s", request.path)

    def _signed_in(self, session: str) -> web.Response:
        response = web.HTTPSeeOther("/")
        response.set_cookie(
            COOKIE,
            session,
            max_age=int(SESSION_TTL.total_seconds()),
            path="/",
            httponly=True,
            samesite="Strict",
            secure=self.secure,
        )
        return response

    async def login_page(self, request: web.Request) -> web.Response:
        """The link's page: a button, so that a link preview fetching it spends nothing."""
        token = request.query.get("t", "")[:200]
        body = (
            "<p>Sign in to your Sidekick dashboard in this browser.</p>"
            '<form method="post" action="/login">'
            f'<input type="hidden" name="t" value="{esc(token)}">'
            '<button id="signin">Sign in</button></form>'
        )
        return page("Sign in", body, None)

    async def login(self, request: web.Request) -> web.Response:
        form = await request.post()
        token = form.get("t")
        session = await self.tokens.open_link(token) if isinstance(token, str) else None
        if session is None:
            text = "This link is used, expired or unknown: send /dashboard for a new one."
            return message("Link not valid", text, status=403)
        return self._signed_in(session)

    async def miniapp(self, request: web.Request) -> web.Response:
        body = '<p id="status">Signing in…</p>'
        scripts = (TELEGRAM_JS, "/static/miniapp.js")
        return page("Sidekick", body, None, csp=MINIAPP_CSP, scripts=scripts)

    async def webapp(self, request: web.Request) -> web.Response:
        token = self.settings.telegram_bot_token
        if token is None:
            return message("Refused", "The bot has no token.", status=403)
        form = await request.post()
        data = form.get("init_data")
        now: datetime = self.host.deps.clock()
        try:
            secret = token.get_secret_value()
            telegram_id = init_data_user(data if isinstance(data, str) else "", secret, now)
        except InitDataError as exc:
            return message("Refused", str(exc), status=403)
        person = await self.tokens.person_of(telegram_id)
        admission = self.host.maybe(ADMISSION)
        allowed = person is not None and (admission is None or await admission.admits(telegram_id))
        if person is None or not allowed:
            return message("Refused", "Talk to the bot first; then open the dashboard.", status=403)
        return self._signed_in(await self.tokens.open_for(person.user_id))

    async def logout(
        self, host: Host, request: web.Request, view: View, form: Form
    ) -> web.Response:
        await self.tokens.sign_out(request.cookies.get(COOKIE, ""))
        response = message("Signed out", "Signed out. Send /dashboard for a new link.")
        response.del_cookie(COOKIE, path="/")
        return response

    async def static(self, request: web.Request) -> web.Response:
        name = request.match_info["name"]
        if name not in ASSETS:
            raise web.HTTPNotFound(text="No such file.")
        body = (STATIC / name).read_bytes()
        response = web.Response(body=body, content_type=ASSETS[name])
        response.headers["Cache-Control"] = "max-age=3600"
        return response


async def serve(host: Host, settings: DashboardSettings, tokens: Tokens) -> Dashboard:
    """The dashboard switched on: its pages on the webhook's server, or a server of its own."""
    if settings.on_webhook:  # the adapter's server takes the routes (tools/feature.py PAGES)
        dashboard = Dashboard(settings, tokens, "serving", site=Site(host, settings, tokens))
        log.info("dashboard: served by the webhook's server at %s", dashboard.url)
        return dashboard
    app = web.Application(client_max_size=MAX_FORM)  # its own server (DASHBOARD=on, or HOST:PORT)
    app.add_routes(Site(host, settings, tokens).routes())
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, settings.dashboard_host, settings.dashboard_port)
    try:
        await site.start()
    except OSError as exc:  # the port is taken: the bot runs on, the doctor says so
        await runner.cleanup()
        log.error("dashboard: cannot listen on %s:%s (%s)", settings.dashboard_host,
                  settings.dashboard_port, exc)  # fmt: skip
        return Dashboard(settings, tokens, f"failed: {exc.strerror or exc}")
    port = int(runner.addresses[0][1])
    dashboard = Dashboard(settings, tokens, "serving", port, runner)
    log.info("dashboard: serving on %s", dashboard.url)
    return dashboard
