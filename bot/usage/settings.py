"""Prices and limits: PRICES, BUDGET_USD (all users' spend) and USER_TOKEN_CAP (each user's
tokens), each limit per day and/or per calendar month in one value: `5/day, 100/month`."""

from __future__ import annotations

import functools
import re

from pydantic import BaseModel, field_validator

from bot.usage.prices import parse_prices

PERIODS = ("day", "month")


@functools.lru_cache(maxsize=32)
def per_period(value: str, whole: bool) -> dict[str, float]:
    """`5/day, 100/month` (either or both) as {"day": 5, "month": 100}; `whole`: the amounts
    are counts (tokens). ValueError with the faulty part otherwise."""
    unit = "a whole number" if whole else "a number"
    shape = f"give {unit} per day and/or per month, e.g. " + (
        "50000/day, 1000000/month" if whole else "5/day, 100/month"
    )
    out: dict[str, float] = {}
    for part in (p.strip() for p in value.split(",")):
        m = re.fullmatch(r"([0-9][0-9_]*(?:\.[0-9]+)?)\s*/\s*(day|month)", part.lower())
        if not m or (whole and "." in m.group(1)):
            raise ValueError(f"{part!r}: {shape}")
        amount, period = float(m.group(1).replace("_", "")), m.group(2)
        if amount <= 0:
            raise ValueError(f"{part!r}: must be more than 0 (leave it empty for no limit)")
        if period in out:
            raise ValueError(f"{part!r}: the {period} is given twice")
        out[period] = amount
    return out


def number(amount: float) -> str:
    """5.0 -> '5', 1000000.0 -> '1000000', 0.25 -> '0.25' (never an exponent)."""
    return f"{amount:f}".rstrip("0").rstrip(".")


def normal(value: str | None, whole: bool) -> str | None:
    """A limit setting as written back (`5/day, 100/month`), None when empty."""
    if value is None or not value.strip():
        return None
    found = per_period(value, whole)
    return ", ".join(f"{number(found[p])}/{p}" for p in PERIODS if p in found)


class UsageSettings(BaseModel):
    # The models' prices: "model=in/out[/cached],..." (USD per 1M tokens) or the path of a
    # JSON file; see bot/usage/prices.py. A model without one is "price unknown".
    prices: str | None = None
    # The spend of all users, USD: `5/day`, `100/month` or both (DAILY_BUDGET_USD and
    # MONTHLY_BUDGET_USD were the two halves).
    budget_usd: str | None = None
    # Tokens (input + output) one user may use: `50000/day`, `1000000/month` or both.
    user_token_cap: str | None = None

    @field_validator("prices")
    @classmethod
    def _check_prices(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            parse_prices(value)  # raises ValueError with the faulty entry
            return value
        return None

    @field_validator("budget_usd")
    @classmethod
    def _check_budget(cls, value: str | None) -> str | None:
        return normal(value, whole=False)

    @field_validator("user_token_cap")
    @classmethod
    def _check_cap(cls, value: str | None) -> str | None:
        return normal(value, whole=True)

    def _limit(self, value: str | None, period: str) -> float | None:
        return per_period(value, False).get(period) if value else None

    @property
    def daily_budget_usd(self) -> float | None:
        return self._limit(self.budget_usd, "day")

    @property
    def monthly_budget_usd(self) -> float | None:
        return self._limit(self.budget_usd, "month")

    @property
    def user_daily_token_cap(self) -> int | None:
        cap = self._limit(self.user_token_cap, "day")
        return int(cap) if cap else None

    @property
    def user_monthly_token_cap(self) -> int | None:
        cap = self._limit(self.user_token_cap, "month")
        return int(cap) if cap else None
