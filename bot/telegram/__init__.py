"""The Telegram adapter (aiogram 3): the only package that imports aiogram."""

# Before any aiogram import in the process: aiogram's types are then built on first use
# rather than all at import (start-up time and memory; see lazy_types).
from bot.telegram import lazy_types

lazy_types.install()
