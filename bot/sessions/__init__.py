"""Sessions: the daily split, archiving into memory, history compression, their commands."""
