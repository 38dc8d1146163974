"""Access: who may talk to the bot beyond ALLOWED_USER_IDS. A stranger's message asks the
owner (Allow / Deny buttons); the yes is kept in the database and takes effect at once, in
every worker; /users lists and removes. The Telegram adapter (bot/telegram/middlewares.py)
asks the app's AccessList (gate.py) who is let in, and Pairing (pairing.py) what to say to
anyone else and when to ask the owner."""

from __future__ import annotations

from tools.feature import Command, Feature, Host, Provide, Setup


def setup() -> Setup:
    from bot.access import commands
    from bot.access.gate import ACCESS, AccessList
    from bot.access.models import AccessEntry
    from bot.access.turns import StopRemoved, marking
    from tools.admission import ADMISSION, Admission
    from tools.base import CheckResult
    from tools.hooks import MARKS, Always, RequestHooks

    async def access_list(host: Host) -> AccessList:
        access = AccessList(host.deps.owners, host.deps.session_factory, host.deliver)
        # The first reaction to a removal, before any other feature's (the approval question
        # a turn waits on closes): the turn must find its chat marked when it goes on.
        access.on_removal(marking(host.part(MARKS)))
        return access

    async def admission(host: Host) -> Admission:
        return await host.need(ACCESS)

    def stop_removed(host: Host) -> RequestHooks:
        return Always(StopRemoved(host.part(ACCESS)))

    async def check(host: Host) -> list[CheckResult]:
        """Who is served: ALLOWED_USER_IDS, or the owner-code mode `sidekick setup`
        recommends (an empty list is no failure there: the first to send the code becomes
        the owner)."""
        access = host.part(ACCESS)
        if access.seed:
            ids = ", ".join(map(str, access.seed))
            return [CheckResult("ALLOWED_USER_IDS", True, f"{ids} (the owner: {access.seed[0]})")]
        owner = await access.owner()
        if owner is not None:
            found = f"empty; the owner (id {owner}) came from the owner code"
            return [CheckResult("ALLOWED_USER_IDS", True, found)]
        found = (
            "empty: the first person to send the bot its owner code privately becomes its "
            "owner (`sidekick run` prints the code at start, `sidekick setup` shows it)"
        )
        return [CheckResult("ALLOWED_USER_IDS", True, found)]

    return Setup(
        models=(AccessEntry,),
        commands=(Command("users", "who may talk to me (owner only)", commands.users),),
        press=commands.press,
        parts=(Provide(ACCESS, access_list), Provide(ADMISSION, admission)),
        turns=(stop_removed,),
        doctor=check,
    )


FEATURE = Feature(name="access", setup=setup)
