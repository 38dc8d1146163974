"""The agent core: one request per user message. Never imports aiogram."""
