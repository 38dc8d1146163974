"""A chart (tools/charts.py): drawn off the loop, sent as a photo above the text."""

from __future__ import annotations

import logging

from aiogram import Bot
from aiogram.exceptions import TelegramAPIError
from aiogram.types import BufferedInputFile

from bot import heap
from bot.telegram.render import with_retry
from tools.charts import DailySeries, chart

log = logging.getLogger(__name__)


async def send_chart(bot: Bot, chat_id: int, series: DailySeries) -> None:
    """Sends the chart, or nothing (no data, no matplotlib, Telegram refused): the text
    that follows carries the same figures either way."""
    png = await chart(series)
    if png is not None:
        await send_png(bot, chat_id, png)


async def send_png(bot: Bot, chat_id: int, png: bytes) -> None:
    photo = BufferedInputFile(png, filename="chart.png")
    try:
        await with_retry(lambda: bot.send_photo(chat_id, photo), "sendPhoto")
    except TelegramAPIError as exc:
        log.warning("sending a chart failed: %s", exc)
    heap.trim()  # the render's buffers are freed but stay mapped until trimmed
