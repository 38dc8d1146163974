"""The one list of features: the tools, tables, commands, jobs and doctor checks are derived
from it. Importing it imports each declaration and settings slice only; what a feature adds
is imported when it is set up (`Feature.adds`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from bot.access.feature import FEATURE as access
from bot.approvals.feature import FEATURE as approvals
from bot.checkins.feature import FEATURE as checkins
from bot.dashboard.feature import FEATURE as dashboard
from bot.media.feature import FEATURE as media
from bot.sessions.feature import FEATURE as sessions
from bot.usage.feature import FEATURE as usage
from bot.voice.feature import FEATURE as voice
from tools.code.feature import FEATURE as code
from tools.discovery.feature import FEATURE as discovery
from tools.feature import Command, Feature
from tools.fetch.feature import FEATURE as fetch
from tools.mcp.feature import FEATURE as mcp
from tools.memory.feature import FEATURE as memory
from tools.reminders.feature import FEATURE as reminders
from tools.search.feature import FEATURE as search
from tools.skills.feature import FEATURE as skills

if TYPE_CHECKING:
    from sqlalchemy import MetaData

    from tools.base import ToolModule

FEATURES: tuple[Feature, ...] = (
    sessions,
    search,
    code,
    memory,
    reminders,
    fetch,
    mcp,
    discovery,
    media,
    voice,
    approvals,
    usage,
    access,
    checkins,
    skills,
    dashboard,
)


def tool_modules(features: tuple[Feature, ...] = FEATURES) -> tuple[ToolModule, ...]:
    """Every feature's tools, in the list's order (the order the model sees them)."""
    return tuple(t for f in features for t in f.adds.tools)


def feature_commands(features: tuple[Feature, ...] = FEATURES) -> tuple[Command, ...]:
    return tuple(c for f in features for c in f.adds.commands)


def metadata(features: tuple[Feature, ...] = FEATURES) -> MetaData:
    """Alembic's metadata: the core tables and every listed feature's."""
    from db.models import Base

    for feature in features:
        for model in feature.adds.models:
            if model.__table__.metadata is not Base.metadata:
                raise TypeError(f"{feature.name}: {model.__name__} is not on db.models' Base")
    return Base.metadata
