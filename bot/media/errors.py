"""The one error of media handling: its text is the sentence the user sees."""

from __future__ import annotations


class MediaError(Exception):
    """A file could not be used (too big, download or transcription failed, ...)."""
