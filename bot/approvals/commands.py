"""/approvals: the user's "always" grants, with a revoke button each where the adapter shows
buttons (`/approvals revoke <tool>` where it does not), and the feature's button presses:
a revoke under that list, and Allow once / Always / Deny under a question."""

from __future__ import annotations

from bot.approvals import repo
from bot.approvals.questions import CHOICES, CLOSED, DOORBELL, answer
from bot.approvals.settings import ApprovalSettings
from tools.feature import Answer, Button, CommandCall, Pressed, row_id

APPROVALS_USAGE = "Usage: /approvals · /approvals revoke <tool>"
COVERS = {False: "in chats", True: "in chats and scheduled tasks"}  # by a grant's `scheduled`


def revoke_data(grant_id: int) -> str:
    return f"revoke:{grant_id}"


async def _text(call: CommandCall) -> str:
    deps, who = call.host.deps, call.who
    verb, _, tool = call.args.strip().partition(" ")
    sf, mode = deps.session_factory, deps.settings_for(ApprovalSettings).approvals
    if verb.lower() == "revoke" and tool.strip():
        gone = await repo.revoke(sf, who.user_id, who.telegram_id, tool.strip(), deps.clock())
        return f"Revoked: {gone} asks again." if gone else f"No grant for {tool.strip()!r}."
    if verb:
        return APPROVALS_USAGE
    grants = await repo.grants(sf, who.user_id)
    head = f"Approvals: {mode}" + (" (nothing asks)" if mode == "off" else "")
    if not grants:
        return f"{head}. You have allowed no tool for good.\n{APPROVALS_USAGE}"
    lines = [f"• {g.tool} (since {g.created_at:%Y-%m-%d}, {COVERS[g.scheduled]})" for g in grants]
    return (
        f"{head}. Allowed for good, without asking:\n" + "\n".join(lines) + f"\n{APPROVALS_USAGE}"
    )


async def approvals(call: CommandCall) -> Answer:
    text = await _text(call)
    grants = await repo.grants(call.host.deps.session_factory, call.who.user_id)
    return Answer(text, tuple((Button(f"Revoke {g.tool}", revoke_data(g.id)),) for g in grants))


async def _revoke(call: CommandCall, grant: str) -> Pressed:
    deps, who = call.host.deps, call.who
    grant_id = row_id(grant)
    if grant_id is None:
        return Pressed("That button is out of date.", alert=True)
    tool = await repo.revoke(deps.session_factory, who.user_id, who.telegram_id, grant_id,
                             deps.clock())  # fmt: skip
    toast = f"Revoked: {tool} asks again." if tool else "That grant is gone already."
    listing = await approvals(CommandCall(call.host, who, ""))
    return Pressed(toast, listing)


async def _answer(call: CommandCall, key: str, choice: str) -> Pressed:
    picked = next((c for c in CHOICES if c == choice), None)
    question = row_id(key)
    if picked is None or question is None:
        return Pressed(CLOSED)
    deps = call.host.deps
    said = await answer(deps.session_factory, deps.clock, question, call.who.telegram_id, picked)
    DOORBELL.ring(question)  # the asker edits the question with the outcome: no answer here
    return Pressed(said)


async def press(call: CommandCall) -> Pressed:
    """`revoke:<grant id>` under /approvals; `answer:<question>:<choice>` under a question."""
    verb, _, rest = call.args.partition(":")
    if verb == "revoke":
        return await _revoke(call, rest)
    if verb == "answer":
        key, _, choice = rest.partition(":")
        return await _answer(call, key, choice)
    return Pressed("That button is out of date.", alert=True)
