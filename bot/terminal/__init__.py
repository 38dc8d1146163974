"""The terminal adapter (`sidekick chat`): the same agent as in Telegram, read and answered
in the terminal, with the slash commands answered locally."""
