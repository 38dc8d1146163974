"""Prices per model (USD per 1M input / output / cached-input tokens) and a call's cost.

The prices are the user's PRICES setting: providers change theirs, and a table kept here
went stale. A model with no price is shown as "price unknown" (tokens only): a price is
never guessed. Speech is metered in characters, priced as input tokens (tts-1=15/0).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path


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
