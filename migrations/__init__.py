"""Alembic migrations; applied at startup and by `sidekick migrate`."""
