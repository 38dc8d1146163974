"""The Telegram adapter (aiogram 3): the only package that imports aiogram."""

# Before any aiogram import in the process: aiogram's types are then built on first use
# rather than all at import (seconds and ~150 MB saved at start-up; see lazy_types).
from bot.telegram import lazy_types

lazy_types.install()
