"""Media settings (voice, images, documents): the media feature's slice of the settings
(bot/media/feature.py)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, SecretStr, field_validator

if TYPE_CHECKING:
    import httpx

TELEGRAM_DOWNLOAD_LIMIT_MB = 20  # getFile serves files up to 20 MB
# In DATA_DIR: what the vision gate learned of each model (bot/llm/vision.py).
VISION_FILE = "vision.json"
# Images go to the model, and a refusal is remembered for that model (VISION_FILE), so a
# text-only model is asked once. Not a setting (LLM_VISION was): auto finds out what `on`
# or `off` made the operator say, and a new LLM_MODEL is tried afresh.
VISION_MODE = "auto"


def off_or_url(value: str | None) -> str | None:
    """Empty: unset (None); `off`; or an http(s) URL without its trailing slash."""
    if value is None or not value.strip():
        return None
    value = value.strip()
    if value.lower() == "off":
        return "off"
    if not re.match(r"^https?://", value):
        raise ValueError("must start with http:// or https:// (or be off)")
    return value.rstrip("/")


def origin(url: str) -> tuple[str, str, int | None]:
    """Scheme, host and port: what a key is tied to."""
    parts = urlsplit(url)
    default = {"http": 80, "https": 443}.get(parts.scheme.lower())
    return parts.scheme.lower(), (parts.hostname or "").lower(), parts.port or default


# `model@URL`: the first `@` before `http://` or `https://` ends the model's name.
_MODEL_AT = re.compile(r"(?P<model>[^@]*)@(?P<url>https?://.*)", re.IGNORECASE | re.DOTALL)


def model_at_url(value: str) -> tuple[str, str | None]:
    """A model's name, or `model@URL` for a direction with its own endpoint (None: the shared
    one's); ValueError in one line."""
    value = value.strip()
    if "@" not in value:
        return value, None
    example = "e.g. kokoro@http://127.0.0.1:8880/v1"
    m = _MODEL_AT.fullmatch(value)
    if m is None:
        raise ValueError(f"after @ comes the endpoint's http:// or https:// URL ({example})")
    model, said = m.group("model").strip(), m.group("url").strip()
    url = said.rstrip("/")
    if not model:
        raise ValueError(f"the model's name comes before @ ({example})")
    if model.lower() == "off":
        raise ValueError("off turns the direction off: write it without @ and a URL")
    if "@" in urlsplit(url).netloc:
        # The URL is shown (doctor, warnings, this line): a key in it would be shown too.
        raise ValueError(
            "a key inside the URL is not supported: SPEECH_API_KEY is sent to "
            "SPEECH_BASE_URL's host only"
        )
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (a port that is no number raises here)
    except ValueError:
        raise ValueError(f"{said} after @ is not a URL ({example})") from None
    if not parts.hostname or re.search(r"\s", url):
        raise ValueError(f"{said} after @ is not a URL ({example})")
    return model, url


def _speech_model(value: str) -> str:
    model_at_url(value)
    return value.strip()


# TRANSCRIBE_MODEL / TTS_MODEL: a model's name or `model@URL`, checked as it is read.
SpeechModel = Annotated[str, AfterValidator(_speech_model)]


def bearer(key: str | None) -> dict[str, str]:
    """A request's headers to a speech endpoint: the key, when one is sent."""
    return {"Authorization": f"Bearer {key}"} if key else {}


async def probe(
    http: httpx.AsyncClient, url: str, key: str | None, what: str, about: str, **request: Any
) -> tuple[bool | None, str]:
    """Is there a `what` route at `url` (doctor)? `request` holds no input (no file, no
    text): a 4xx other than 401/403/404/405 means the route is there, and nothing is made
    or billed. None: the endpoint has no such route at all (404/405)."""
    import httpx  # the settings slice is read before any client is made

    try:
        code = (await http.post(url, headers=bearer(key), timeout=15.0, **request)).status_code
    except httpx.HTTPError as exc:
        return False, f"{url}: {type(exc).__name__}"
    if code in (404, 405):
        return None, f"{url}: HTTP {code}, no {what} route"
    if code in (401, 403) or code >= 500:
        return False, f"{url}: HTTP {code} to a request without input"
    return True, f"{url} answers (HTTP {code} to a request without input, {about})"


def _plain(key: SecretStr | str | None) -> str | None:
    value = key.get_secret_value() if isinstance(key, SecretStr) else key
    return value or None


@dataclass(frozen=True)
class Endpoint:
    """Where one direction goes, and which settings named the URL and the key (doctor shows
    names, never the key)."""

    base_url: str
    api_key: str | None
    model: str
    named_by: str
    key_from: str | None

    def key_to_check(self) -> str:
        """What the admin should look at when the server refuses the request (401/403)."""
        if self.key_from:
            return self.key_from
        if self.named_by in ("SPEECH_BASE_URL", "LLM_BASE_URL"):
            return "SPEECH_API_KEY"
        return (
            f"{self.named_by}: its server was sent no key (SPEECH_API_KEY goes to "
            "SPEECH_BASE_URL's host only)"
        )

    def said(self) -> str:
        """Where the URL and key come from, as doctor says it."""
        url = "the LLM endpoint" if self.named_by == "LLM_BASE_URL" else f"from {self.named_by}"
        key = f"{self.key_from} sent" if self.key_from else "no key sent"
        return f"{url}, {key}"


class SpeechSettings(BaseModel):
    """The audio endpoint voice notes and voice replies share (OpenAI's audio API, and the
    local servers that copy it, serve both routes)."""

    # An OpenAI-compatible /audio endpoint. Empty: the LLM endpoint's; off: no voice at all.
    # TRANSCRIBE_BASE_URL and TTS_BASE_URL were one each.
    speech_base_url: str | None = None
    # Empty: LLM_API_KEY when the speech endpoint is the LLM's, else none (the LLM's key
    # goes only to the LLM's own endpoint).
    speech_api_key: SecretStr | None = None

    @field_validator("speech_base_url")
    @classmethod
    def _check_url(cls, value: str | None) -> str | None:
        return off_or_url(value)

    def off(self, model: str) -> bool:
        """A direction set off by its model (`off`) or with the whole speech endpoint."""
        return model.strip().lower() == "off" or self.speech_base_url == "off"

    def speech_endpoint(
        self, llm_base_url: str, llm_api_key: SecretStr | str | None
    ) -> tuple[str | None, str | None]:
        """The shared audio endpoint's base URL (None: SPEECH_BASE_URL=off) and the key to
        send it: SPEECH_API_KEY, else the LLM's key when it is the LLM's host."""
        if self.speech_base_url == "off":
            return None, None
        base = self.speech_base_url or llm_base_url
        if self.speech_api_key is not None:
            return base, self.speech_api_key.get_secret_value()
        return base, _plain(llm_api_key) if origin(base) == origin(llm_base_url) else None

    def direction(
        self, setting: str, value: str, llm_base_url: str, llm_api_key: SecretStr | str | None
    ) -> Endpoint | None:
        """The endpoint one direction uses, from its model setting (`setting`, e.g.
        TTS_MODEL, holding `value`); None: SPEECH_BASE_URL=off. A `model@URL` goes to its
        own URL, which gets the shared endpoint's key only on the shared endpoint's host
        (one key, one server), else the LLM's key only on the LLM's host, else none."""
        base, key = self.speech_endpoint(llm_base_url, llm_api_key)
        if base is None:
            return None
        key_from = "SPEECH_API_KEY" if self.speech_api_key is not None else "LLM_API_KEY"
        model, own = model_at_url(value)
        if own is None:
            shared = "SPEECH_BASE_URL" if self.speech_base_url else "LLM_BASE_URL"
            return Endpoint(base, key, model, shared, key_from if key else None)
        if origin(own) != origin(base):
            key = _plain(llm_api_key) if origin(own) == origin(llm_base_url) else None
            key_from = "LLM_API_KEY"
        return Endpoint(own, key, model, setting, key_from if key else None)


class MediaSettings(SpeechSettings):
    # Speech to text on the speech endpoint, or `model@URL` on its own; off: voice messages
    # are not transcribed.
    transcribe_model: SpeechModel = "whisper-1"
