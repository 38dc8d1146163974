"""The `schedule` tool: reminders and scheduled tasks."""
