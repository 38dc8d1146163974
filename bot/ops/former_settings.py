"""Settings merged into others: a .env written for an older release still starts. Each
former name is translated into its replacement with one warning line saying what it was read
as; a value that cannot be translated is one error line, never silently dropped."""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from pydantic import BaseModel

from bot.llm.settings import ModelSettings, split_models
from bot.media.settings import MediaSettings, off_or_url, origin
from bot.sessions.settings import parse_split
from bot.usage.settings import number
from bot.voice.settings import VoiceSettings
from tools.code.settings import GENERATE_MEMORY_MB, GENERATE_TIMEOUT_S


@dataclass
class Translation:
    values: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Raw:
    """Upper-cased names, each value with where it came from (a .env's path, "environment");
    blank values are unset, as for every setting."""

    values: Mapping[str, tuple[str, str]]

    def get(self, name: str) -> str | None:
        found = self.values.get(name)
        return found[0] if found is not None and found[0].strip() else None

    def where(self, name: str) -> str:
        return self.values[name][1]

    def present(self, *names: str) -> list[str]:
        return [n for n in names if self.get(n) is not None]


Rule = Callable[[Raw, Translation], None]
# Each rule, and the former names it reads (not "unknown" to the misspelling check): it runs
# when one of them is set.
RULES: dict[Rule, tuple[str, ...]] = {}


def reads(*names: str) -> Callable[[Rule], Rule]:
    def register(rule: Rule) -> Rule:
        RULES[rule] = names
        return rule

    return register


def _replaced(
    t: Translation, raw: Raw, old: str, new: str, shown: str, note: str = "", said: str = ""
) -> None:
    """`said`: how the former name is shown when its value matters (`TTS_BASE_URL=off`)."""
    t.warnings.append(
        f"{raw.where(old)}: {said or old} is replaced by {new}{note}: read as {shown}; "
        "write that instead"
    )


def _unused(t: Translation, raw: Raw, old: str, why: str) -> None:
    t.warnings.append(f"{raw.where(old)}: {old} is no longer a setting ({why}); remove it")


def _new_is_set(t: Translation, raw: Raw, olds: list[str], new: str) -> bool:
    """The replacement is set too: it wins, and each former name is said to be unused."""
    if raw.get(new) is None:
        return False
    for old in olds:
        _unused(t, raw, old, f"{new} replaces it and is set, so its value is not used")
    return True


@reads("SESSION_SPLIT_TIME")
def session_split(raw: Raw, t: Translation) -> None:
    old = "SESSION_SPLIT_TIME"
    at = raw.values[old][0]
    m = re.fullmatch(r"\s*([01]?\d|2[0-3]):([0-5]\d)\s*", at)
    if not m:
        t.errors.append(f"{old}: must be HH:MM, e.g. 04:00 (now part of SESSION_SPLIT)")
        return
    at = f"{int(m.group(1)):02d}:{m.group(2)}"
    split = raw.get("SESSION_SPLIT") or "daily"
    try:
        normal = parse_split(split)
    except ValueError:
        return  # SESSION_SPLIT's own error line says what is wrong with it
    if normal == "none":
        _unused(t, raw, old, "it had no effect with SESSION_SPLIT=none")
    elif ":" in split:
        _unused(t, raw, old, f"SESSION_SPLIT={split} says the time, so its value is not used")
    else:
        value = f"{normal.split()[0]} {at}"
        t.values["session_split"] = value
        _replaced(t, raw, old, "SESSION_SPLIT", f"SESSION_SPLIT={value}")


@reads("CODE_PRIVATE_NETWORKS")
def code_network(raw: Raw, t: Translation) -> None:
    old = "CODE_PRIVATE_NETWORKS"
    value = raw.values[old][0].strip().lower()
    if value not in ("on", "off"):
        t.errors.append(f"{old}: must be on or off (now CODE_NETWORK=all for on)")
        return
    network = (raw.get("CODE_NETWORK") or "on").strip().lower()
    if value == "off":
        _unused(t, raw, old, "off is CODE_NETWORK=on, the default")
    elif network == "on":
        t.values["code_network"] = "all"
        _replaced(t, raw, old, "CODE_NETWORK", "CODE_NETWORK=all", said=f"{old}=on")
    elif network in ("off", "all"):
        _unused(t, raw, old, f"CODE_NETWORK={network} says what the code reaches")


@reads("CODE_GENERATE_TIMEOUT_S", "CODE_GENERATE_MEMORY_MB")
def code_generate(raw: Raw, t: Translation) -> None:
    """Constants now: the built-in value is a warning; another value cannot be kept, so it
    stops the start rather than change what a job may use behind the operator's back."""
    for old, built_in, what in (
        ("CODE_GENERATE_TIMEOUT_S", GENERATE_TIMEOUT_S, "an OpenCode job runs up to {} s"),
        ("CODE_GENERATE_MEMORY_MB", GENERATE_MEMORY_MB, "an OpenCode job has {} MB"),
    ):
        value = raw.get(old)
        if value is None:
            continue
        if value.strip() == str(built_in):
            _unused(t, raw, old, f"built in: {what.format(built_in)}")
        else:
            t.errors.append(
                f"{old}: is no longer a setting and {value.strip()} cannot be kept (built in: "
                f"{what.format(built_in)}); remove it"
            )


@reads("TRANSCRIBE_BASE_URL", "TTS_BASE_URL", "TRANSCRIBE_API_KEY", "TTS_API_KEY")
def speech(raw: Raw, t: Translation) -> None:
    urls: dict[str, str] = {}
    for old, model in (("TRANSCRIBE_BASE_URL", "TRANSCRIBE_MODEL"), ("TTS_BASE_URL", "TTS_MODEL")):
        value = raw.get(old)
        if value is None:
            continue
        try:
            url = off_or_url(value)
        except ValueError as exc:
            t.errors.append(f"{old}: {exc} (now SPEECH_BASE_URL)")
            continue
        if url == "off":
            t.values[model.lower()] = "off"
            _replaced(t, raw, old, model, f"{model}=off", said=f"{old}=off")
        elif url is not None:
            urls[old] = url
    keys = {old: v for old in ("TRANSCRIBE_API_KEY", "TTS_API_KEY") if (v := raw.get(old))}
    for kind in ("TRANSCRIBE", "TTS"):
        if (raw.get(f"{kind}_MODEL") or "").strip().lower() == "off":
            # That direction is off: where it went, and with which key, no longer matters.
            for old in (f"{kind}_BASE_URL", f"{kind}_API_KEY"):
                if urls.pop(old, None) is not None or keys.pop(old, None) is not None:
                    _unused(t, raw, old, f"{kind}_MODEL=off turns that direction off")
    # Where each direction went: an unset URL meant the LLM endpoint (a bad LLM_BASE_URL
    # has its own error line, and is not copied into TTS_MODEL).
    llm = _url(raw.get("LLM_BASE_URL") or _default(ModelSettings, "llm_base_url"))
    if urls and llm and raw.get("SPEECH_BASE_URL") is None and _both_on(raw, t):
        stt = urls.get("TRANSCRIBE_BASE_URL", llm)
        tts = urls.get("TTS_BASE_URL", llm)
        if stt != tts and not _two_servers(raw, t, urls, keys, stt, tts):
            return
    # On two servers, a key goes to SPEECH_BASE_URL's host only.
    two = "@" in t.values.get("tts_model", "")
    note = "" if two else " (voice notes and voice replies share it)"
    _one_of(raw, t, urls, "SPEECH_BASE_URL", lambda url: f"SPEECH_BASE_URL={url}", note)
    _one_of(raw, t, keys, "SPEECH_API_KEY", lambda _: "SPEECH_API_KEY (the same key)", note)


def _url(value: str) -> str | None:
    try:
        url = off_or_url(value)
    except ValueError:
        return None
    return None if url == "off" else url


def _both_on(raw: Raw, t: Translation) -> bool:
    """Voice notes and voice replies both on: else the one left takes SPEECH_BASE_URL."""
    return all(
        (t.values.get(name) or raw.get(name.upper()) or "").strip().lower() != "off"
        for name in ("transcribe_model", "tts_model")
    )


def _two_servers(
    raw: Raw, t: Translation, urls: dict[str, str], keys: dict[str, str], stt: str, tts: str
) -> bool:
    """Speech to text and text to speech on two servers (whisper.cpp beside Kokoro, or one
    of them on the LLM endpoint): the first is SPEECH_BASE_URL (unset: the LLM's), the
    second TTS_MODEL=model@URL. A TTS server with a key of its own cannot be said (the key
    goes to SPEECH_BASE_URL's host only): an error naming what to write. True: the caller
    translates what is left in `urls` and `keys` (a TTS key on the transcription server's
    host is that server's key); False: an error."""
    model = (raw.get("TTS_MODEL") or _default(VoiceSettings, "tts_model")).strip()
    if "@" in model:
        for old in raw.present("TTS_BASE_URL", "TTS_API_KEY"):
            _unused(t, raw, old, f"TTS_MODEL={model} says where voice replies go")
        keys.pop("TTS_API_KEY", None)
        urls.pop("TTS_BASE_URL", None)
        return True
    tts_key, stt_key = keys.get("TTS_API_KEY"), keys.get("TRANSCRIBE_API_KEY")
    if tts_key is not None and origin(tts) != origin(stt):
        if stt_key is None:
            stt_model = raw.get("TRANSCRIBE_MODEL") or _default(MediaSettings, "transcribe_model")
            t.errors.append(
                f"TTS_API_KEY: the text-to-speech server {tts} needs its own key, and only "
                f"SPEECH_BASE_URL's server gets one now: write SPEECH_BASE_URL={tts}, "
                f"SPEECH_API_KEY=<your TTS_API_KEY> and TRANSCRIBE_MODEL={stt_model.strip()}@{stt}"
            )
        else:
            t.errors.append(
                f"TRANSCRIBE_API_KEY and TTS_API_KEY: servers {stt} and {tts} each need a key, "
                "and only SPEECH_BASE_URL's server gets one now: set SPEECH_BASE_URL and "
                "SPEECH_API_KEY for one, and turn the other off (TRANSCRIBE_MODEL=off or "
                "TTS_MODEL=off) or serve it without a key (TRANSCRIBE_MODEL or TTS_MODEL="
                "model@URL)"
            )
        return False
    olds = raw.present("TRANSCRIBE_BASE_URL", "TTS_BASE_URL")
    t.values["tts_model"] = f"{model}@{tts}"
    read = [f"TTS_MODEL={model}@{tts}"]
    if urls.pop("TRANSCRIBE_BASE_URL", None) is not None:
        t.values["speech_base_url"] = stt
        read.insert(0, f"SPEECH_BASE_URL={stt}")
    urls.pop("TTS_BASE_URL", None)
    where = " and ".join(dict.fromkeys(raw.where(n) for n in olds))
    if len(olds) == 2:
        said = "TRANSCRIBE_BASE_URL and TTS_BASE_URL differ and are replaced by SPEECH_BASE_URL"
        said += " and TTS_MODEL"
    elif olds == ["TTS_BASE_URL"]:
        said = "TTS_BASE_URL is replaced by TTS_MODEL (voice notes stay on the LLM endpoint)"
    else:
        said = (
            "TRANSCRIBE_BASE_URL is replaced by SPEECH_BASE_URL, and voice replies stay on "
            "the LLM endpoint (TTS_MODEL names it)"
        )
    t.warnings.append(f"{where}: {said}: read as {' and '.join(read)}; write that instead")
    return True


def _default(settings: type[BaseModel], name: str) -> str:
    return str(settings.model_fields[name].default)


def _one_of(
    raw: Raw,
    t: Translation,
    found: dict[str, str],
    new: str,
    shown: Callable[[str], str],
    note: str,
) -> None:
    """Two former settings, one replacement: translated when they agree (or one is set)."""
    if not found or _new_is_set(t, raw, list(found), new):
        return
    if len(set(found.values())) > 1:
        olds = " and ".join(found)
        t.errors.append(
            f"{olds} differ, and one {new} serves voice notes and voice replies now: set "
            f"{new} (and TRANSCRIBE_MODEL=off or TTS_MODEL=off for a direction not served)"
        )
        return
    value = next(iter(found.values()))
    t.values[new.lower()] = value
    for old in found:
        _replaced(t, raw, old, new, shown(value), note)


def _per_period(raw: Raw, t: Translation, new: str, day: str, month: str, whole: bool) -> None:
    present = raw.present(day, month)
    if not present or _new_is_set(t, raw, present, new):
        return
    parts = []
    for old, period in ((day, "day"), (month, "month")):
        value = raw.get(old)
        if value is None:
            continue
        try:
            amount = int(value) if whole else float(value)
        except ValueError:
            amount = 0
        if not 0 < amount < math.inf:
            unit = "a whole number of tokens" if whole else "a number of USD"
            t.errors.append(f"{old}: must be {unit} more than 0 (now {new}, e.g. {new}=5/day)")
            return
        parts.append(f"{number(amount)}/{period}")
    value = ", ".join(parts)
    t.values[new.lower()] = value
    for old in present:
        _replaced(t, raw, old, new, f"{new}={value}")


@reads("DAILY_BUDGET_USD", "MONTHLY_BUDGET_USD", "USER_DAILY_TOKEN_CAP", "USER_MONTHLY_TOKEN_CAP")
def budgets(raw: Raw, t: Translation) -> None:
    _per_period(raw, t, "BUDGET_USD", "DAILY_BUDGET_USD", "MONTHLY_BUDGET_USD", whole=False)
    _per_period(
        raw, t, "USER_TOKEN_CAP", "USER_DAILY_TOKEN_CAP", "USER_MONTHLY_TOKEN_CAP", whole=True
    )


@reads("EMBEDDINGS_MODEL")
def embeddings(raw: Raw, t: Translation) -> None:
    old = "EMBEDDINGS_MODEL"
    model = raw.values[old][0].strip()
    kind = (raw.get("EMBEDDINGS") or "wordllama").strip()
    if kind.lower() == "openai":
        t.values["embeddings"] = model
        _replaced(t, raw, old, "EMBEDDINGS", f"EMBEDDINGS={model}", " (the model's name)")
    elif kind.lower() in ("wordllama", "minilm"):
        _unused(t, raw, old, f"it had no effect with EMBEDDINGS={kind}")
    else:
        _unused(t, raw, old, f"EMBEDDINGS={kind} names the model, so its value is not used")


@reads("LLM_MODELS")
def models(raw: Raw, t: Translation) -> None:
    old = "LLM_MODELS"
    more = raw.values[old][0]
    names = split_models(raw.get("LLM_MODEL") or "") + split_models(more)
    value = ", ".join(dict.fromkeys(names))
    t.values["llm_model"] = value
    _replaced(t, raw, old, "LLM_MODEL", f"LLM_MODEL={value}", " (the default model first)")


RENAMED = frozenset(name for names in RULES.values() for name in names)


def translate(raw: Raw) -> Translation:
    t = Translation()
    for rule, names in RULES.items():
        if raw.present(*names):
            rule(raw, t)
    return t
