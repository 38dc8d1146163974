"""The Telegram adapter (aiogram 3): the only package that imports aiogram."""
