"""Access: who may talk to the bot beyond ALLOWED_USER_IDS. A stranger's message asks the
owner (Allow / Deny buttons); the yes is kept in the database and takes effect at once, in
every worker; /users lists and removes. The Telegram adapter (bot/telegram/middlewares.py)
asks the app's AccessList (gate.py) who is let in, and Pairing (pairing.py) what to say to
anyone else and when to ask the owner."""

from __future__ import annotations

from bot.access import commands
from bot.access.gate import ACCESS, AccessList
from bot.access.models import AccessEntry
from bot.access.turns import StopRemoved
from tools.admission import ADMISSION, Admission
from tools.feature import Command, Feature, Host, Provide
from tools.hooks import Always, RequestHooks


async def access_list(host: Host) -> AccessList:
    return AccessList(host.deps.owners, host.deps.session_factory)


async def admission(host: Host) -> Admission:
    return await host.need(ACCESS)


def stop_removed(host: Host) -> RequestHooks:
    return Always(StopRemoved(host.part(ACCESS)))


FEATURE = Feature(
    name="access",
    models=(AccessEntry,),
    commands=(Command("users", "who may talk to me (owner only)", commands.users),),
    press=commands.press,
    parts=(Provide(ACCESS, access_list), Provide(ADMISSION, admission)),
    turns=(stop_removed,),
)
