"""Sidekick: a self-hosted personal assistant that lives in Telegram."""
