"""Access: who may talk to the bot beyond ALLOWED_USER_IDS. A stranger's message asks the
owner (Allow / Deny buttons); the yes is kept in the database and takes effect at once, in
every worker; /users lists and removes. The check itself runs in the Telegram adapter
(bot/telegram/middlewares.py) on the app's AccessList (bot/access/gate.py)."""

from __future__ import annotations

from bot.access import commands
from bot.access.models import AccessEntry
from tools.feature import Command, Feature

FEATURE = Feature(
    name="access",
    models=(AccessEntry,),
    commands=(Command("users", "who may talk to me (owner only)", commands.users),),
    press=commands.press,
)
