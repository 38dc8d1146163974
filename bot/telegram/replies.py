"""A feature's Answer (tools/feature.py) as Telegram messages: the chart, the text with its
buttons, the file, then the answers that follow; sent through the outbox. The features'
router renders commands' and buttons' answers with it, the access check the owner's
request (bot/access)."""

from __future__ import annotations

from dataclasses import replace

from aiogram.types import InlineKeyboardButton, InlineKeyboardMarkup, WebAppInfo

from bot import heap
from bot.telegram.outbox import Outbox, text_items
from bot.telegram.render import Chunk, Item, render, split_plain
from tools.feature import Answer, Feature, button_data


def markup(feature: Feature, answer: Answer) -> InlineKeyboardMarkup | None:
    rows = [
        [
            InlineKeyboardButton(text=b.label, callback_data=button_data(feature, b.data))
            for b in row
        ]
        for row in answer.buttons
    ]
    if answer.web_app is not None:
        app = WebAppInfo(url=answer.web_app.url)
        rows.insert(0, [InlineKeyboardButton(text=answer.web_app.label, web_app=app)])
    return InlineKeyboardMarkup(inline_keyboard=rows) if rows else None


async def answer_items(feature: Feature, answer: Answer) -> list[Item]:
    """The chart first (the text under it carries the same figures), the text with its
    buttons, then the file, then the messages that follow."""
    items: list[Item] = []
    png = await answer.chart() if answer.chart is not None else None
    if png is not None:
        items.append(Item("photo", data=png, filename="chart.png"))
        heap.trim()  # the render's buffers are freed but stay mapped until trimmed
    chunks: list[Chunk] = (
        render(answer.text)
        if answer.markdown
        else [(t, []) for t in split_plain(answer.text) or ["(empty)"]]
    )
    texts = text_items(chunks)
    texts[-1] = replace(texts[-1], markup=markup(feature, answer))  # buttons under the last
    items += texts
    if answer.file is not None:
        name, content = answer.file
        items.append(Item("document", data=content, filename=name))
    for then in answer.more:
        items += await answer_items(feature, then)
    return items


async def send_answer(
    outbox: Outbox,
    chat_id: int,
    feature: Feature,
    answer: Answer,
    about: int | None = None,
    *,
    forbidden_raises: bool = False,
) -> None:
    """A command's reply, through the outbox: in the chat's order, and kept through a
    Telegram outage (charts, buttons and files too). `forbidden_raises`: a chat closed to
    the bot raises TelegramForbiddenError (a private reply to a group member) instead of
    being logged."""
    items = await answer_items(feature, answer)
    await outbox.send(chat_id, about, items, forbidden_raises=forbidden_raises)
