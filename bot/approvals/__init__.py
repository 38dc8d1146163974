"""Approvals: the gate before risky tool calls (gate.py), the question's answer and the
audit (questions.py, repo.py, models.py), /approvals with its revoke buttons
(commands.py), declared once in feature.py."""
