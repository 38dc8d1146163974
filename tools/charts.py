"""Charts of figures per day (/codestats, /usage): one PNG of a stacked bar per day, drawn
in a worker thread with matplotlib imported then; without it, the text answers alone.
"""

from __future__ import annotations

import asyncio
import io
import logging
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import date, datetime, timedelta
from zoneinfo import ZoneInfo

from tools.model_call import PURPOSE_LABELS

log = logging.getLogger(__name__)

PALETTE = ("#1e88e5", "#8e24aa", "#43a047", "#f4511e", "#6d4c41", "#00acc1", "#fdd835")


@dataclass
class DailySeries:
    """Values per day (oldest first) for each named part of a stacked bar."""

    title: str
    unit: str
    days: list[date]
    parts: dict[str, list[float]] = field(default_factory=dict)
    colours: dict[str, str] = field(default_factory=dict)

    @property
    def empty(self) -> bool:
        return not any(v for values in self.parts.values() for v in values)


def day_range(now: datetime, tz: ZoneInfo, days: int) -> list[date]:
    today = now.astimezone(tz).date()
    return [today - timedelta(days=n) for n in range(days - 1, -1, -1)]


def bucket(
    days: list[date], tz: ZoneInfo, points: Iterable[tuple[datetime, str, float]]
) -> dict[str, list[float]]:
    index = {d: i for i, d in enumerate(days)}
    parts: dict[str, list[float]] = defaultdict(lambda: [0.0] * len(days))
    for at, name, value in points:
        i = index.get(at.astimezone(tz).date())
        if i is not None:
            parts[name][i] += value
    return dict(parts)


def usage_series(
    rows: list[tuple[datetime, str, int, float | None]], now: datetime, tz: ZoneInfo, days: int
) -> DailySeries:
    """Spend per day by purpose when every call has a price, else tokens per day."""
    priced = bool(rows) and all(cost is not None for *_, cost in rows)
    span = day_range(now, tz, days)

    def label(purpose: str) -> str:
        return PURPOSE_LABELS.get(purpose, purpose)

    if priced:
        points = ((at, label(p), float(cost or 0.0)) for at, p, _, cost in rows)
        unit, what = "USD", "Spend"
    else:
        points = ((at, label(p), float(tokens)) for at, p, tokens, _ in rows)
        unit, what = "tokens", "Tokens"
    parts = dict(sorted(bucket(span, tz, points).items()))
    colours = {name: PALETTE[i % len(PALETTE)] for i, name in enumerate(parts)}
    return DailySeries(f"{what} per day by purpose (last {days} days)", unit, span, parts,
                       colours)  # fmt: skip


def render_png(series: DailySeries) -> bytes:
    """A stacked bar chart as PNG bytes. Raises ImportError without matplotlib."""
    # The object API, not pyplot: no global figure state, safe in a worker thread.
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8, 4), dpi=100)
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    x = list(range(len(series.days)))
    bottom = [0.0] * len(x)
    for name, values in series.parts.items():
        ax.bar(x, values, bottom=bottom, label=name, color=series.colours.get(name))
        bottom = [b + v for b, v in zip(bottom, values, strict=True)]
    step = max(1, len(x) // 10)
    ax.set_xticks(x[::step], [d.strftime("%b %d") for d in series.days][::step])
    ax.set_title(series.title)
    ax.set_ylabel(series.unit)
    ax.grid(axis="y", alpha=0.3)
    ax.set_axisbelow(True)
    if series.parts:
        ax.legend(loc="upper left", fontsize="small")
    fig.tight_layout()
    out = io.BytesIO()
    fig.savefig(out, format="png")
    return out.getvalue()


async def chart(series: DailySeries) -> bytes | None:
    """The PNG, drawn off the event loop; None when there is nothing to draw or no
    plotting library (the caller sends the text alone)."""
    if series.empty:
        return None
    try:
        png = await asyncio.to_thread(render_png, series)
    except ImportError:
        log.info("matplotlib is not installed: charts are off (pip install 'sidekick[charts]')")
        return None
    except Exception:  # a chart is a nicety: the text answers regardless
        log.exception("drawing a chart failed")
        return None
    return png
