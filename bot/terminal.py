"""`sidekick chat`: the same agent in the terminal, as the single local user."""

from __future__ import annotations

import asyncio
import getpass
import sys

from bot.agent.runner import Events, Incoming
from bot.app import build_app
from bot.config import Settings, require
from bot.errors import user_text


async def run_chat(settings: Settings) -> None:
    require(settings, "llm_model")
    app = await build_app(settings)
    app.warm_up()  # the model loads while the user types
    name = getpass.getuser()
    print("Sidekick in the terminal. /new starts a new session, /quit (or Ctrl-D) leaves.")
    loop = asyncio.get_running_loop()
    try:
        while True:
            line = await loop.run_in_executor(None, _read)
            if line is None or line.strip() in {"/quit", "/exit"}:
                break
            if not line.strip():
                continue
            if line.strip().startswith("/new"):
                from bot.agent.archive import archiver_from
                from bot.agent.sessions import start_new_session

                title = line.strip()[4:].strip() or None
                await start_new_session(
                    app.session_factory,
                    app.agent.clock,
                    telegram_user_id=None,
                    user_name=name,
                    name=title,
                    archiver=archiver_from(app.deps, app.settings.tz),
                )
                print("(new session)")
                continue
            printed = 0

            async def on_text(text: str) -> None:
                nonlocal printed
                sys.stdout.write(text[printed:])
                sys.stdout.flush()
                printed = len(text)

            async def on_tools(names: list[str]) -> None:
                nonlocal printed
                sys.stdout.write(f"\n[running {', '.join(names)}]\n")
                printed = 0

            try:
                reply = await app.agent.handle(
                    Incoming(line, telegram_user_id=None, user_name=name),
                    Events(on_text=on_text, on_tools=on_tools),
                )
                if printed == 0:
                    sys.stdout.write(reply.text)
                sys.stdout.write("\n")
            except Exception as exc:
                print(f"\n{user_text(exc)}")
    finally:
        await app.close()


def _read() -> str | None:
    try:
        return input("\nyou> ")
    except EOFError:
        return None
