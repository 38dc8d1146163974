"""The owner's side of pairing: the request message with Allow / Deny, /users with a Remove
button per person or group let in from the chat, and those buttons' presses."""

from __future__ import annotations

from bot.access import repo
from bot.access.gate import ACCESS
from bot.access.models import AccessEntry
from tools.feature import Answer, Button, CommandCall, Pressed

OWNER_ONLY = "Only the bot's owner can do that."
BIGINT_MAX = 2**63 - 1  # the access table keeps chat ids as BigInteger


def chat_id_of(text: str) -> int | None:
    """A chat id read back from a button's data (which anyone can forge), or None: ASCII
    digits after an optional minus, no more than the table's BigInteger holds (a longer
    number overflowed the driver and failed the press with a traceback)."""
    digits = text.removeprefix("-")
    if not digits.isascii() or not digits.isdigit() or len(digits) > 19:
        return None
    number = int(text)
    return number if -BIGINT_MAX <= number <= BIGINT_MAX else None


def request_answer(entry: AccessEntry, asker: str = "") -> Answer:
    """What the owner gets when a stranger (or a group) asks to be let in."""
    if entry.kind == "group":
        text = (
            f"{asker or 'Someone'} asks you to admit the group {entry.name or '(no title)'} "
            f"(chat id {entry.chat_id}): everyone in it could then talk to me there."
        )
    else:
        text = f"{entry.name or 'Someone'} (Telegram id {entry.chat_id}) asks to talk to me."
    buttons = (Button("Allow", f"allow:{entry.chat_id}"), Button("Deny", f"deny:{entry.chat_id}"))
    return Answer(text, (buttons,))


async def _is_owner(call: CommandCall) -> bool:
    """The owner (first of ALLOWED_USER_IDS, or learned), or the terminal's local user: the
    person at the machine."""
    if call.host.local:
        return True
    who = call.who.telegram_id
    return who is not None and await call.host.part(ACCESS).owner() == who


def _line(e: AccessEntry) -> str:
    what = "group" if e.kind == "group" else "id"
    since = f"since {(e.decided_at or e.asked_at):%Y-%m-%d}"
    state = {"pending": "asked, waiting for you", "owner": "owner"}.get(e.state, since)
    return f"• {e.name or '(no name)'} ({what} {e.chat_id}): {state}"


async def users(call: CommandCall) -> Answer | str:
    """/users: the seed list, then everyone let in from the chat, with Remove buttons."""
    if not await _is_owner(call):
        return OWNER_ONLY
    access = call.host.part(ACCESS)
    rows = await access.entries()
    lines = [f"• id {i}: in ALLOWED_USER_IDS (.env)" for i in access.seed]
    lines += [_line(e) for e in rows if e.chat_id not in access.seed]
    buttons: list[tuple[Button, ...]] = []
    for e in rows:
        if e.chat_id in access.seed or e.state == "owner":
            continue
        if e.state == "pending":
            buttons.append((Button(f"Allow {e.name or e.chat_id}", f"allow:{e.chat_id}"),
                            Button("Deny", f"deny:{e.chat_id}")))  # fmt: skip
        else:
            buttons.append((Button(f"Remove {e.name or e.chat_id}", f"remove:{e.chat_id}"),))
    if access.turned_away:
        lines.append(
            f"• {len(access.turned_away)} more request(s) turned away while {repo.MAX_WAITING} "
            "were waiting: they may ask again once you answer these."
        )
        access.turned_away, access.told_full = set(), False
    if not lines:
        return "Nobody is let in yet. A stranger who messages me asks you here first."
    foot = "A stranger who messages me asks you first; people in ALLOWED_USER_IDS stay."
    return Answer("Who may talk to me:\n" + "\n".join(lines) + f"\n{foot}", tuple(buttons))


async def press(call: CommandCall) -> Pressed:
    """`allow:<chat id>`, `deny:<chat id>` under a request or /users; `remove:<chat id>`."""
    verb, _, key = call.args.partition(":")
    state = {"allow": "allowed", "deny": "denied", "remove": "removed"}.get(verb)
    chat_id = chat_id_of(key)
    if state is None or chat_id is None:
        return Pressed("That button is out of date.", alert=True)
    if not await _is_owner(call):
        return Pressed(OWNER_ONLY, alert=True)
    access = call.host.part(ACCESS)
    try:
        before, changed = await access.decide(
            chat_id, state, call.who.telegram_id, call.host.deps.clock()
        )
    except ValueError as exc:
        return Pressed(str(exc), alert=True)
    if before is None:
        return Pressed("That request is gone.", alert=True)
    who = before.name or str(chat_id)
    if not changed:
        return Pressed(f"Already decided: {who} is {before.state}.", await _listing(call))
    if verb == "remove":
        return Pressed(f"Removed {who}.", await _listing(call))
    done = {"allowed": "Allowed", "denied": "Denied"}[state]
    return Pressed(f"{done}: {who}.", Answer(f"{request_answer(before).text}\n→ {done}."))


async def _listing(call: CommandCall) -> Answer:
    got = await users(call)
    return Answer(got) if isinstance(got, str) else got
