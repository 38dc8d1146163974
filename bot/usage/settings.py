"""Prices and budgets: PRICES, DAILY_BUDGET_USD, MONTHLY_BUDGET_USD, USER_*_TOKEN_CAP."""

from __future__ import annotations

from pydantic import BaseModel, Field, field_validator

from bot.usage.prices import parse_prices


class UsageSettings(BaseModel):
    # The models' prices: "model=in/out[/cached],..." (USD per 1M tokens) or the path of a
    # JSON file; see bot/usage/prices.py. A model without one is "price unknown".
    prices: str | None = None
    daily_budget_usd: float | None = Field(default=None, gt=0)
    monthly_budget_usd: float | None = Field(default=None, gt=0)
    # Tokens (input + output) one user may use per day / per calendar month.
    user_daily_token_cap: int | None = Field(default=None, gt=0)
    user_monthly_token_cap: int | None = Field(default=None, gt=0)

    @field_validator("prices")
    @classmethod
    def _check_prices(cls, value: str | None) -> str | None:
        if value is not None and value.strip():
            parse_prices(value)  # raises ValueError with the faulty entry
            return value
        return None

    @field_validator(
        "daily_budget_usd",
        "monthly_budget_usd",
        "user_daily_token_cap",
        "user_monthly_token_cap",
        mode="before",
    )
    @classmethod
    def _blank_is_off(cls, value: object) -> object:
        return None if isinstance(value, str) and not value.strip() else value
