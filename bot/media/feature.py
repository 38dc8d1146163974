"""Media: voice messages transcribed, photos shown to the model, documents extracted.

The Telegram adapter turns what a person sent into MediaItems and hands them to the
MediaService the composition root builds (bot/media/setup.py, beside the model's vision
gate); this folder is everything after that, and the doctor's lines.
"""

from __future__ import annotations

from bot.media.doctor import check_media
from bot.media.settings import MediaSettings
from tools.feature import Feature

FEATURE = Feature(name="media", settings=MediaSettings, doctor=check_media)
