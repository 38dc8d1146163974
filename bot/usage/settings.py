"""The usage feature's settings slice, and the price table and limits read from it.

PRICES: the models' prices (USD per 1M input / output / cached-input tokens), the table a
call's cost is worked out from. They are the user's setting: providers change theirs, and a
table kept here went stale. A model with no price is shown as "price unknown" (tokens only):
a price is never guessed. Speech is metered in characters, priced as input tokens
(tts-1=15/0).

BUDGET_USD (all users' spend) and USER_TOKEN_CAP (each user's tokens): each limit per day
and/or per calendar month in one value: `5/day, 100/month`."""

from __future__ import annotations

import functools
import json
import re
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, field_validator

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


@dataclass(frozen=True)
class Price:
    input: float
    output: float
    cached: float | None = None  # cached input; None: billed like other input


_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{8}|\d{4})$")  # gpt-4o-2024-08-06, ...-20241022


def _price(name: str, value: object) -> Price:
    if isinstance(value, dict):
        parts = [value.get("input"), value.get("output"), value.get("cached")]
    elif isinstance(value, list | tuple):
        parts = [*value, None, None][:3]
    else:
        raise ValueError(f"{name}: give input/output[/cached] prices")
    try:
        numbers = [None if p is None else float(p) for p in parts]
    except (TypeError, ValueError):
        raise ValueError(f"{name}: prices must be numbers (USD per 1M tokens)") from None
    if numbers[0] is None or numbers[1] is None or any(n is not None and n < 0 for n in numbers):
        raise ValueError(f"{name}: give input/output[/cached] prices, none negative")
    return Price(numbers[0], numbers[1], numbers[2])


def parse_prices(value: str) -> dict[str, Price]:
    """`model=in/out[/cached]` entries separated by commas or semicolons, or a JSON file
    `{"model": {"input": 0.15, "output": 0.6, "cached": 0.075}}` (or `[in, out, cached]`)."""
    value = value.strip()
    if "=" not in value:
        path = Path(value).expanduser()
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except OSError as exc:
            raise ValueError(f"cannot read price file {value}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise ValueError(f"price file {value} is not valid JSON: {exc.msg}") from None
        if not isinstance(data, dict):
            raise ValueError(f"price file {value}: expected an object of model -> prices")
        return {str(k).strip().lower(): _price(str(k), v) for k, v in data.items()}
    out: dict[str, Price] = {}
    for entry in re.split(r"[,;\n]", value):
        if not entry.strip():
            continue
        name, sep, nums = entry.partition("=")
        if not sep or not name.strip():
            raise ValueError(f"{entry.strip()!r}: write model=input/output[/cached]")
        out[name.strip().lower()] = _price(name.strip(), nums.strip().split("/"))
    return out


class PriceTable:
    def __init__(self, prices: dict[str, Price] | None = None) -> None:
        self.prices = dict(prices or {})

    @classmethod
    def from_setting(cls, value: str | None) -> PriceTable:
        return cls(parse_prices(value) if value else None)

    def lookup(self, model: str) -> Price | None:
        """The price of a model, also under its provider prefix (openai/gpt-4o) or a dated
        snapshot name (gpt-4o-2024-08-06); None when unknown."""
        name = model.strip().lower()
        candidates = [name, name.rsplit("/", 1)[-1]]
        candidates += [_DATED.sub("", c) for c in candidates]
        for c in candidates:
            if c in self.prices:
                return self.prices[c]
        return None

    def cost(self, model: str, prompt: int, completion: int, cached: int = 0) -> float | None:
        """USD for one call; None when the model has no price."""
        price = self.lookup(model)
        if price is None:
            return None
        cached = min(max(cached, 0), prompt)
        cached_rate = price.input if price.cached is None else price.cached
        usd = (prompt - cached) * price.input + cached * cached_rate + completion * price.output
        return usd / 1_000_000


class UsageSettings(BaseModel):
    # The models' prices: "model=in/out[/cached],..." (USD per 1M tokens) or the path of a
    # JSON file; see parse_prices. A model without one is "price unknown".
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
