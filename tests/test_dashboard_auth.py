"""The Mini App's initData check (bot/dashboard/auth.py) on the inputs a forger would try:
each is refused with its own reason, and only Telegram's exact signature passes."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest

from bot.dashboard.auth import InitDataError, csrf_of, init_data_user
from tests.dashboard_client import sign_init_data

TOKEN = "123456:bot-token"
NOW = datetime(2026, 12, 6, 8, 0, tzinfo=UTC)


def fields(user: object = None, auth: datetime = NOW, **more: str) -> dict[str, str]:
    user = {"id": 1001, "first_name": "Ana"} if user is None else user
    return {"auth_date": str(int(auth.timestamp())), "user": json.dumps(user), **more}


def test_a_valid_signature_names_the_user() -> None:
    data = sign_init_data(fields(query_id="AAE", signature="sig"), TOKEN)
    assert init_data_user(data, TOKEN, NOW) == 1001
    assert init_data_user(data, TOKEN, NOW + timedelta(minutes=59)) == 1001


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        ("", "no Mini App data"),
        ("x" * 9000, "too much"),
        ("a=1&&b", "malformed"),
        (sign_init_data(fields(), "999:other"), "not signed by this bot"),
        (sign_init_data(fields(), TOKEN).replace("hash=", "hash=0"), "not signed"),
        (sign_init_data(fields(), TOKEN) + "&extra=1", "not signed"),
        (sign_init_data(fields(), TOKEN) + "&auth_date=1", "repeats a field"),
        (sign_init_data(fields(auth=NOW - timedelta(hours=2)), TOKEN), "stale"),
        (sign_init_data(fields(auth=NOW + timedelta(hours=1)), TOKEN), "stale"),
        (sign_init_data(fields(user={"id": "1001"}), TOKEN), "lacks its user"),
        (sign_init_data(fields(user={"id": True}), TOKEN), "lacks its user"),
        (sign_init_data(fields(user=[1001]), TOKEN), "lacks its user"),
        (sign_init_data({"user": json.dumps({"id": 1})}, TOKEN), "lacks its date"),
        (sign_init_data({**fields(), "user": "{not json"}, TOKEN), "lacks its date or user"),
    ],
)
def test_forgeries_are_refused(data: str, reason: str) -> None:
    with pytest.raises(InitDataError, match=reason):
        init_data_user(data, TOKEN, NOW)


def test_the_csrf_token_depends_on_the_session() -> None:
    assert csrf_of("a") != csrf_of("b") and csrf_of("a") == csrf_of("a")
