"""Settings from the environment and .env (pydantic-settings). .env and relative paths in it
are read from SIDEKICK_HOME, else the current directory; blank values mean unset."""

from __future__ import annotations

import difflib
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal

from pydantic import (
    AliasChoices,
    BaseModel,
    Field,
    PrivateAttr,
    SecretStr,
    ValidationError,
    field_validator,
)
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from bot.features import FEATURES
from bot.llm.settings import HttpUrl, ModelSettings
from bot.ops.former_settings import RENAMED, Raw, translate
from tools.errors import ConfigError

LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL")


def settings_union() -> type[BaseModel]:
    slices = dict.fromkeys(f.settings for f in FEATURES if f.settings is not None)
    bases: tuple[type[BaseModel], ...] = tuple(slices)
    doc = "The union of the features' settings."
    return type("FeatureSettings", bases, {"__doc__": doc, "__module__": __name__})


if TYPE_CHECKING:
    # mypy cannot follow a class made at run time. It sees the slices bot/ reads by
    # attribute; a feature reads its own through ToolDeps.settings_for(Model), and
    # tests/test_config.py checks that this view and the list agree.
    from bot.media.settings import MediaSettings
    from bot.sessions.settings import SessionSettings
    from bot.usage.settings import UsageSettings
    from bot.voice.settings import VoiceSettings
    from tools.code.settings import CodeSettings
    from tools.fetch.settings import FetchSettings
    from tools.mcp.settings import ExtensionSettings
    from tools.memory.settings import MemorySettings
    from tools.search.settings import SearchSettings

    class FeatureSettings(
        SessionSettings,
        CodeSettings,
        MemorySettings,
        SearchSettings,
        FetchSettings,
        MediaSettings,
        VoiceSettings,
        UsageSettings,
        ExtensionSettings,
    ):
        """The union of the features' settings."""

else:
    FeatureSettings = settings_union()


class Settings(
    BaseSettings,
    FeatureSettings,
    ModelSettings,
):
    """Every setting Sidekick reads: the features' slices and the model's inherited flat, so
    each variable keeps its name; this class adds the rest."""

    model_config = SettingsConfigDict(
        env_file=".env",
        env_file_encoding="utf-8",
        extra="ignore",
        case_sensitive=False,
        env_ignore_empty=True,
    )

    # Telegram
    telegram_bot_token: SecretStr | None = None
    telegram_api_url: HttpUrl = "https://api.telegram.org"
    # In the order given: the first is the owner (asked to let strangers in, bot/access).
    allowed_user_ids: Annotated[tuple[int, ...], NoDecode] = ()
    webhook_url: str | None = None
    webhook_listen: str = "127.0.0.1:8080"
    # In groups: answer only messages addressed to the bot (mention, reply), or all of them.
    group_replies: Literal["mention", "all"] = "mention"

    # Storage and logs
    data_dir: Path = Path("./data")
    database_url: str | None = None
    log_level: str = "INFO"
    # Daily backups into DATA_DIR/backups, keeping this many (0: off).
    backup_keep: int = Field(default=0, ge=0, le=1000)

    @field_validator("allowed_user_ids", mode="before")
    @classmethod
    def _split_ids(cls, value: object) -> object:
        if isinstance(value, str):
            parts = [p for p in re.split(r"[,\s]+", value.strip()) if p]
            try:
                return tuple(dict.fromkeys(int(p) for p in parts))
            except ValueError as exc:
                raise ValueError("must be comma-separated numeric Telegram user ids") from exc
        return value

    @field_validator("telegram_bot_token")
    @classmethod
    def _token_shape(cls, value: SecretStr | None) -> SecretStr | None:
        # The shape aiogram insists on (digits:secret); checked here so a typo is one line
        # at start instead of aiogram's traceback later.
        if value is not None and not re.fullmatch(r"\d+:[A-Za-z0-9_-]+", value.get_secret_value()):
            raise ValueError(
                "does not look like a bot token (123456:ABC-...); copy it from @BotFather"
            )
        return value

    @field_validator("log_level")
    @classmethod
    def _level(cls, value: str) -> str:
        level = value.strip().upper()
        if level not in LOG_LEVELS:
            raise ValueError(f"must be one of {', '.join(LOG_LEVELS)}")
        return level

    @field_validator("database_url")
    @classmethod
    def _known_database(cls, value: str | None) -> str | None:
        if value is not None and not re.match(
            r"^(sqlite(\+aiosqlite)?:///|postgres(ql)?(\+asyncpg)?://)", value
        ):
            raise ValueError(
                "must be sqlite+aiosqlite:////absolute/path.db or postgresql://user:pass@host/db"
            )
        return value

    # The .env these settings were read from (the owner learned from the first message is
    # written back to it); set by settings_and_errors.
    _env_source: Path | None = PrivateAttr(default=None)
    # One warning line per former name read (bot/ops/former_settings.py); set there too.
    _renamed: tuple[str, ...] = PrivateAttr(default=())

    @property
    def env_source(self) -> Path | None:
        return self._env_source

    @property
    def renamed(self) -> tuple[str, ...]:
        """What the former names in .env or the environment were read as, one line each."""
        return self._renamed

    @property
    def db_url(self) -> str:
        if self.database_url:
            return self.database_url
        return f"sqlite+aiosqlite:///{(self.data_dir / 'sidekick.db').resolve()}"

    def secrets(self) -> list[str]:
        """Every SecretStr setting's value, so logs and replies can be scrubbed of them."""
        values = (getattr(self, name) for name in type(self).model_fields)
        return [
            v.get_secret_value()
            for v in values
            if isinstance(v, SecretStr) and v.get_secret_value()
        ]


def sidekick_home() -> Path:
    home = os.environ.get("SIDEKICK_HOME", "").strip()
    return Path(home).expanduser() if home else Path(".")


def load_settings(env_file: Path | None = None, **overrides: object) -> Settings:
    settings, errors = settings_and_errors(env_file, **overrides)
    if errors:
        raise ConfigError("\n".join(errors))
    return settings


def env_path(env_file: Path | None = None) -> Path:
    return env_file or sidekick_home() / ".env"


def settings_and_errors(
    env_file: Path | None = None, **overrides: object
) -> tuple[Settings, list[str]]:
    """Settings with every invalid value put back to its default, and one line per value at
    fault: the caller adds its own checks on the rest, so a person sees every problem at once
    instead of one per run."""
    home = sidekick_home()
    if env_file is not None and not env_file.is_file():
        raise ConfigError(f"--env-file: {env_file} is not a readable file")
    if home != Path(".") and not home.is_dir():
        raise ConfigError(f"SIDEKICK_HOME: {home} is not a directory")
    former = translate(raw_values(env_path(env_file), overrides))
    errors: list[str] = list(former.errors)
    fallback: dict[str, object] = {}
    while True:
        try:
            # A translated value already holds what the arguments said of its setting.
            values = {**overrides, **former.values, **fallback}
            settings = Settings(_env_file=env_path(env_file), **values)  # type: ignore[arg-type, call-arg]
            break
        except ValidationError as exc:
            bad = {str(e["loc"][0]) for e in exc.errors() if e["loc"]}
            errors += [_describe(err) for err in exc.errors()]
            fields = field_names()
            if not bad or bad <= fallback.keys() or not bad <= fields.keys():
                raise ConfigError("\n".join(errors)) from None
            # The default of a field that failed, under the name it failed by (its alias
            # when it has one); a model-level rule that still fails ends the loop above.
            fallback |= {
                loc: Settings.model_fields[fields[loc]].get_default(call_default_factory=True)
                for loc in bad
            }
    settings._env_source = env_path(env_file)
    settings._renamed = tuple(former.warnings)
    # Relative paths mean "in SIDEKICK_HOME", so the bot finds its data from any directory.
    if not settings.data_dir.is_absolute():
        settings.data_dir = home / settings.data_dir
    if settings.mcp_config is not None and not settings.mcp_config.is_absolute():
        settings.mcp_config = home / settings.mcp_config
    return settings, errors


def raw_values(path: Path, overrides: dict[str, object]) -> Raw:
    # In pydantic-settings' order (the arguments over the environment over .env).
    from dotenv import dotenv_values

    where = str(path)
    out = (
        {k.upper(): (v or "", where) for k, v in dotenv_values(path).items()}
        if path.is_file()
        else {}
    )
    out |= {k.upper(): (v, "environment") for k, v in os.environ.items()}
    out |= {
        k.upper(): (str(v), "settings")
        for k, v in overrides.items()
        if isinstance(v, (str, int, float))
    }
    return Raw(out)


def field_names() -> dict[str, str]:
    """Each name a setting is read by (as in error locations) and the field it fills."""
    out: dict[str, str] = {}
    for name, field in Settings.model_fields.items():
        alias = field.validation_alias
        choices = alias.choices if isinstance(alias, AliasChoices) else [alias]
        out |= {c: name for c in [name, *choices] if isinstance(c, str)}
    return out


def known_names() -> set[str]:
    return {name.upper() for name in field_names()}


# Read by docker-compose.yml or the shell, not by Sidekick: never "unknown".
NOT_SETTINGS = frozenset({"SEARXNG_SECRET", "POSTGRES_PASSWORD", "SIDEKICK_HOME", "LB_BIND"})

# Former settings, now constants beside the code that uses them: a .env written for an older
# release still starts, with one warning line for each.
RETIRED = frozenset(
    {
        "AGENT_MAX_TOOL_CALLS", "AGENT_MAX_TURNS", "APPROVAL_TIMEOUT_S", "BRAVE_API_URL",
        "BRAVE_RATE_PER_SECOND", "BUN_PATH", "CODE_MAX_CONCURRENT", "CODE_TIMEOUT_MS",
        "DOCUMENT_INLINE_CHARS", "DOCUMENT_MAX_PAGES", "HISTORY_TOKEN_BUDGET", "IMAGE_MAX_SIDE",
        "LLM_MAX_RETRIES", "LLM_VISION", "MCP_LOG_FILE", "MCP_TIMEOUT_S", "MEDIA_MAX_MB",
        "MEDIA_TIMEOUT_S", "MEMORY_FTS_LANGUAGE", "MEMORY_MID_DAYS", "MEMORY_RECALL_TOKENS",
        "MEMORY_RERANK_WORDS", "MEMORY_SHORT_DAYS", "REMINDER_CONCURRENCY",
        "REMINDER_DELIVERY_ATTEMPTS", "REMINDER_MISFIRE_HOURS", "SEARCH_PROVIDER",
        "SUMMARY_REVIEW", "TOOL_TOKEN_BUDGET", "TRANSCRIBE_TIMEOUT_S", "TTS_MAX_CHARS",
        "TTS_TIMEOUT_S", "WEBHOOK_SECRET",
    }
)  # fmt: skip


def unknown_names(env_file: Path | None = None) -> list[str]:
    """One line per variable that looks meant for Sidekick but is not a setting: every unknown
    name in .env (with the closest real name if there is one), and environment variables only
    when they are close to a real name, so the rest of the environment is left alone."""
    from dotenv import dotenv_values

    known = known_names()
    path = env_path(env_file)
    in_file = [k.upper() for k in dotenv_values(path)] if path.is_file() else []
    out: list[str] = []
    # A name taken up again is a setting, not a former one; a renamed one is translated
    # (its warning comes with the settings: Settings.renamed).
    retired = RETIRED - known
    in_file = [n for n in in_file if n not in RENAMED]
    in_env = {k.upper() for k in os.environ} - RENAMED
    for name in sorted((set(in_file) | in_env) & retired):
        where = path if name in in_file else "environment"
        out.append(f"{where}: {name} is no longer a setting (its default is built in); remove it")
    for name in sorted(set(in_file) - known - NOT_SETTINGS - retired):
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.75)
        hint = f"; did you mean {close[0]}?" if close else " (ignored)"
        out.append(f"{path}: {name} is not a setting{hint}")
    prefixes = {name.split("_")[0] for name in known}
    for name in sorted(in_env - known - NOT_SETTINGS - retired - set(in_file)):
        if name.split("_")[0] not in prefixes:
            continue
        close = difflib.get_close_matches(name, known, n=1, cutoff=0.8)
        if close:
            out.append(f"environment: {name} is not a setting; did you mean {close[0]}?")
    return out


HOW_TO_SET = {
    "telegram_bot_token": "get one from @BotFather and put TELEGRAM_BOT_TOKEN=... in .env",
    "llm_model": "set LLM_MODEL, e.g. gpt-4o-mini or llama3.1",
}


def missing(settings: Settings, *names: str) -> list[str]:
    out = []
    for name in names:
        value = getattr(settings, name)
        if isinstance(value, SecretStr):
            value = value.get_secret_value()
        if not value:
            out.append(f"{name.upper()} is not set: {HOW_TO_SET.get(name, 'set it in .env')}")
    return out


def _describe(err: Any) -> str:
    name = str(err["loc"][0]).upper() if err["loc"] else "settings"
    msg = str(err["msg"]).removeprefix("Value error, ")
    return f"{name}: {msg}"


def require(settings: Settings, *names: str) -> None:
    found = missing(settings, *names)
    if found:
        raise ConfigError("\n".join(found))
