"""A memory about the person comes from the person (issue 46 item 3), replayed on the summaries
a real 1.5B model wrote over a day (tests/fixtures/llm/day/): each said what the person never
did ("Marta is 20 years old", from the model's own earlier answers) or that an action happened
that no call did ("The user's reminder ... is still active": every call that day was written
as unread text). Sidekick's own words are no source for what the person said; a claimed
action needs its call in the record."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path

import pytest

from bot.sessions.summary import grounding_source
from db.models.core import Message
from tools.grounding import check_grounded, claimed_actions

DAY = json.loads((Path(__file__).parent / "fixtures" / "llm" / "day" / "excerpts.json").read_text())
_TURN = re.compile(r"\n\n(?=\d{4}-\d{2}-\d{2} (?:User|Sidekick|Tool result): )")
_HEAD = re.compile(r"(\d{4}-\d{2}-\d{2}) (User|Sidekick|Tool result): (.*)", re.S)
ROLES = {"User": "user", "Sidekick": "assistant", "Tool result": "tool"}


def turns_of(sent: str) -> list[Message]:
    """The turns a recorded summary request showed, as stored messages. The earlier summary
    it continued ("Summary of turns …") is left out: it was one of these, and would not
    stand under this check."""
    body = sent.split("\n\n", 1)[1]
    out = []
    for i, part in enumerate(_TURN.split(body)):
        m = _HEAD.match(part.strip())
        if m is None:
            continue
        day = datetime.strptime(m[1], "%Y-%m-%d").replace(tzinfo=UTC)
        text = m[3]
        calls = None
        if m[2] == "Sidekick" and text.startswith("(calls tools: "):
            text, calls = "", text.removeprefix("(calls tools: ")
        out.append(Message(id=i + 1, role=ROLES[m[2]], content=text, tool_calls=calls,
                           created_at=day))  # fmt: skip
    return out


def checked(n: str) -> str:
    recorded = DAY["summaries"][n]
    grounds = grounding_source(turns_of(recorded["turns"]))
    found = check_grounded(
        recorded["content"], grounds.theirs, grounds.record, grounds.actions,
        tool_succeeded=grounds.tool_ok,
    )  # fmt: skip
    return found.reason()


@pytest.mark.parametrize("n", ["22", "27", "32"])
def test_a_summary_that_says_a_reminder_was_set_needs_the_call(n: str) -> None:
    assert "a reminder no call set" in checked(n)


def test_what_the_model_said_of_the_person_is_not_what_the_person_said() -> None:
    # The archive of the session: its one line, from the model's own "20-year-old artist".
    why = checked("38")
    assert "numbers not in the turns: 20" in why, why


def test_a_faithful_summary_of_the_same_turns_passes() -> None:
    turns = turns_of(DAY["summaries"]["38"]["turns"])
    grounds = grounding_source(turns)
    summary = (
        "Marta is a nurse in Lisbon. Her sister Anna lives in Porto. She is allergic to "
        "peanuts, her car's license plate is 42-XP-17, and she asked to be reminded in 2 "
        "minutes to take the laundry out. She plans to visit Anna in Porto on 9 January."
    )
    found = check_grounded(summary, grounds.theirs, grounds.record, grounds.actions)
    assert found.ok, found.reason()


def test_a_set_reminder_in_the_record_supports_the_claim() -> None:
    day = datetime(2026, 12, 6, tzinfo=UTC)
    call = '[{"id": "c1", "type": "function", "function": {"name": "schedule", '
    call += '"arguments": "{\\"action\\": \\"create\\", \\"kind\\": \\"reminder\\", '
    call += '\\"text\\": \\"Take the laundry out\\", \\"in_minutes\\": 2}"}}]'
    turns = [
        Message(id=1, role="user", content="Remind me in 2 minutes to take the laundry out.",
                created_at=day),
        Message(id=2, role="assistant", content="", tool_calls=call, created_at=day),
        Message(id=3, role="tool", tool_call_id="c1", created_at=day,
                content="Scheduled reminder #1: in 2 minutes (UTC); next run 2026-12-06 03:49."),
    ]  # fmt: skip
    grounds = grounding_source(turns)
    said = "Sidekick set a reminder for the user to take the laundry out in 2 minutes."
    assert check_grounded(said, grounds.theirs, grounds.record, grounds.actions).ok
    failed = [*turns[:2], Message(id=3, role="tool", tool_call_id="c1", created_at=day,
                                  content="Error: the time has passed")]  # fmt: skip
    grounds = grounding_source(failed)
    assert not check_grounded(said, grounds.theirs, grounds.record, grounds.actions).ok


@pytest.mark.parametrize(
    ("sentence", "claims"),
    [
        ("The user asked to be reminded at 9.", []),
        ("Marta wants a reminder tomorrow.", []),
        ("Marta will remind the user in 2 minutes.", ["remind"]),
        ("The reminder was set for 9:00.", ["remind"]),
        ("Sidekick sent the message to Rui.", ["sent"]),
    ],
)
def test_what_counts_as_a_claimed_action(sentence: str, claims: list[str]) -> None:
    assert claimed_actions(sentence) == claims
