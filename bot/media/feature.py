"""Media: voice messages transcribed, photos shown to the model, documents extracted.

The Telegram adapter turns what a person sent into MediaItems and hands them to this
feature's MediaService (MEDIA); the model's vision gate is its model wrapper (a model that
refuses images answers without them, and the person reads why under the answer).
"""

from __future__ import annotations

from bot.media.settings import MediaSettings
from tools.feature import Feature, Provide, Setup


def setup() -> Setup:
    from bot.llm.vision import VISION
    from bot.media.attachments import MEDIA
    from bot.media.doctor import check_media
    from bot.media.setup import media, vision_gate, vision_state

    return Setup(
        parts=(Provide(VISION, vision_state), Provide(MEDIA, media)),
        wraps=(vision_gate,),
        doctor=check_media,
    )


FEATURE = Feature(name="media", settings=MediaSettings, setup=setup)
