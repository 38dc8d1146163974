"""`sidekick setup`: asks for what a first start needs, checks each answer at once (getMe,
the endpoint's model list, one search) and writes it into .env (mode 600), keeping every other
line. Run again, it shows what is set (secrets masked) and changes what is picked. Plain
prompts, so it works over SSH; secrets are typed without echo and never printed back."""

from __future__ import annotations

import asyncio
import getpass
import os
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx
from pydantic import SecretStr

from bot.llm.settings import ModelSettings, split_models
from bot.media.settings import bearer
from bot.ops.envfile import mask, read_env, set_values
from tools.tls import tls_context

TOKEN_SHAPE = re.compile(r"\d+:[A-Za-z0-9_-]+")
CHECK_TIMEOUT_S = 15.0
MODELS_SHOWN = 30
DEFAULT_URL = str(ModelSettings.model_fields["llm_base_url"].default)
EXAMPLE = Path(__file__).resolve().parents[2] / ".env.example"


@dataclass(frozen=True)
class Preset:
    label: str
    url: str
    needs_key: bool
    model: str = ""  # offered when the server lists none


PRESETS = (
    Preset("OpenAI", "https://api.openai.com/v1", True, "gpt-4o-mini"),
    Preset("OpenRouter", "https://openrouter.ai/api/v1", True, "openai/gpt-4o-mini"),
    Preset("Ollama on this machine", "http://localhost:11434/v1", False),
    Preset("llama.cpp server (llama-server)", "http://localhost:8080/v1", False),
)


class Prompt:
    def __init__(
        self, ask: Callable[[str], str] = input, secret: Callable[[str], str] = getpass.getpass
    ) -> None:
        self._ask, self._secret = ask, secret

    def say(self, text: str = "") -> None:
        print(text, flush=True)

    def ask(self, question: str, default: str = "") -> str:
        shown = f" [{default}]" if default else ""
        return self._ask(f"{question}{shown}: ").strip() or default

    def secret(self, question: str, current: str) -> str:
        shown = f" [{mask(current)}, Enter keeps]" if current else ""
        return self._secret(f"{question}{shown}: ").strip() or current

    def yes(self, question: str, default: bool = False) -> bool:
        answer = self._ask(f"{question} [{'Y/n' if default else 'y/N'}]: ").strip().lower()
        return default if not answer else answer.startswith("y")


def _get(url: str, headers: dict[str, str] | None = None) -> httpx.Response:
    with httpx.Client(timeout=CHECK_TIMEOUT_S, follow_redirects=True, verify=tls_context()) as http:
        return http.get(url, headers=headers)


def check_token(api_url: str, token: str) -> tuple[bool, str]:
    if not TOKEN_SHAPE.fullmatch(token):
        return False, "that does not look like a bot token (123456:ABC-...)"
    try:
        data = _get(f"{api_url.rstrip('/')}/bot{token}/getMe").json()
    except (httpx.HTTPError, ValueError) as exc:
        return False, f"could not reach Telegram at {api_url} ({type(exc).__name__})"
    if not data.get("ok"):
        return False, f"Telegram refused it ({data.get('description', 'no reason given')})"
    me = data["result"]
    return True, f"@{me.get('username')} ({me.get('first_name', '')})"


def list_models(base_url: str, key: str) -> tuple[list[str] | None, str]:
    """The models the endpoint lists, or None and why (empty reason: it has no list)."""
    try:
        resp = _get(f"{base_url.rstrip('/')}/models", bearer(key))
    except httpx.HTTPError as exc:
        return None, f"cannot connect to {base_url} ({type(exc).__name__}): is the server running?"
    if resp.status_code in (401, 403):
        return None, f"HTTP {resp.status_code}: the key was refused"
    if resp.status_code == 404:
        return None, ""  # no list here: one short call checks the model instead
    try:
        data = resp.json()
        return sorted(str(m["id"]) for m in data["data"]), ""
    except (ValueError, KeyError, TypeError):
        v1 = "" if base_url.rstrip("/").endswith("/v1") else " (does the URL end in /v1?)"
        return None, f"not an OpenAI-compatible answer (HTTP {resp.status_code}){v1}"


def try_model(base_url: str, key: str, model: str) -> tuple[bool, str]:
    body = {"model": model, "messages": [{"role": "user", "content": "Say OK"}], "max_tokens": 5}
    try:
        with httpx.Client(timeout=CHECK_TIMEOUT_S * 4, verify=tls_context()) as http:
            url = f"{base_url.rstrip('/')}/chat/completions"
            resp = http.post(url, json=body, headers=bearer(key))
    except httpx.HTTPError as exc:
        return False, f"cannot connect to {base_url} ({type(exc).__name__})"
    if resp.status_code != 200:
        return False, f"HTTP {resp.status_code}: {resp.text[:200]}"
    return True, "it answered"


def check_search(searxng: str, brave: str) -> tuple[bool, str]:
    from tools.search.doctor import check_search as search_check
    from tools.search.settings import SearchSettings

    settings = SearchSettings(
        searxng_url=searxng or None, brave_api_key=SecretStr(brave) if brave else None
    )

    async def run() -> tuple[bool, str]:
        async with httpx.AsyncClient(timeout=CHECK_TIMEOUT_S, verify=tls_context()) as http:
            results = await search_check(settings, http)
        bad = [r for r in results if not r.ok]
        if bad:
            return False, "; ".join(f"{r.detail} ({r.fix})" if r.fix else r.detail for r in bad)
        return True, "; ".join(r.detail for r in results)

    return asyncio.run(run())


class Wizard:
    def __init__(self, env: Path, prompt: Prompt) -> None:
        self.env = env
        self.p = prompt
        self.values = read_env(env)

    def get(self, name: str) -> str:
        return self.values.get(name, "")

    def save(self, changes: dict[str, str | None]) -> None:
        if not self.env.exists() and EXAMPLE.is_file():
            # The example's comments explain every line: start from it.
            self.env.write_text(EXAMPLE.read_text(encoding="utf-8"), encoding="utf-8")
        set_values(self.env, changes)
        self.values = read_env(self.env)
        self.p.say(f"  saved to {self.env} (mode 600): {', '.join(changes)}")

    def telegram(self) -> None:
        self.p.say("\nTelegram bot token: from @BotFather (send it /newbot), like 123456:ABC-...")
        api = os.environ.get("TELEGRAM_API_URL") or self.get("TELEGRAM_API_URL")
        api = api or "https://api.telegram.org"
        while True:
            token = self.p.secret("Bot token", self.get("TELEGRAM_BOT_TOKEN"))
            if not token:
                continue
            self.p.say("  checking with Telegram (getMe)...")
            ok, said = check_token(api, token)
            if ok:
                self.p.say(f"  ok: this is your bot {said}")
                break
            self.p.say(f"  not ok: {said}")
            if "refused" not in said and self.p.yes("  Keep it anyway?"):
                break
        self.save({"TELEGRAM_BOT_TOKEN": token})

    def model(self) -> None:
        saved = self.get("LLM_BASE_URL")
        url = saved
        # LLM_MODEL may name more models after the default (what /model offers): the one
        # picked here becomes the default, the others stay while the endpoint does and
        # offers them. A first setup keeps none: those came with the example file.
        listed = split_models(self.get("LLM_MODEL")) if complete(self.values) else []
        model = listed[0] if listed else ""
        self.p.say("\nThe model: any OpenAI-compatible endpoint.")
        choice = "keep" if url else "1"
        while True:
            preset, url = self._endpoint(url, choice)
            # Never send one server's key to another.
            key = self.get("LLM_API_KEY") if url == saved else ""
            reached, models, key = self._reach(url, key, preset.needs_key if preset else True)
            if reached:
                break
            # Not reached and not kept: the endpoint again, what was typed as the default.
            choice = str(PRESETS.index(preset) + 1 if preset else len(PRESETS) + 1)
        model = self._pick_model(url, key, models, model or (preset.model if preset else ""))
        kept = [m for m in listed if m != model and (models is None or m in models)]
        models_line = ", ".join([model, *(kept if url == saved else [])])
        self.save({"LLM_BASE_URL": url, "LLM_API_KEY": key or None, "LLM_MODEL": models_line})

    def _endpoint(self, url: str, default: str) -> tuple[Preset | None, str]:
        for i, shown in enumerate(PRESETS, 1):
            self.p.say(f"  {i}) {shown.label:34} {shown.url}")
        self.p.say(f"  {len(PRESETS) + 1}) another OpenAI-compatible URL")
        while True:
            choice = self.p.ask(f"Choose 1-{len(PRESETS) + 1}", default)
            if choice == "keep":
                return next((p for p in PRESETS if p.url == url), None), url
            if choice.isdigit() and 1 <= int(choice) <= len(PRESETS) + 1:
                preset = PRESETS[int(choice) - 1] if int(choice) <= len(PRESETS) else None
                if preset and preset.needs_key:
                    return preset, preset.url
                # Asked again after a failure, the URL typed last is the default to correct.
                again = url if choice == default and url else (preset.url if preset else url)
                return preset, self.p.ask("Endpoint URL (ending in /v1)", again)

    def _reach(self, url: str, key: str, needs_key: bool) -> tuple[bool, list[str] | None, str]:
        """The key, asked until the endpoint answers (or is kept as it is): whether it was,
        its models (None: no list), the key. A refused key is asked again; anything else
        is the URL's fault, and not keeping it goes back to the URL."""
        while True:
            question = "API key" if needs_key else "API key (Enter: none)"
            key = self.p.secret(question, key)
            self.p.say(f"  checking {url} (listing its models)...")
            models, why = list_models(url, key)
            if models is not None or not why:
                return True, models, key
            self.p.say(f"  not ok: {why}")
            if "refused" in why:
                continue
            return self.p.yes("  Keep these anyway?"), None, key

    def _pick_model(self, url: str, key: str, models: list[str] | None, current: str) -> str:
        if models:
            self.p.say(f"  ok: {len(models)} models")
            for i, name in enumerate(models[:MODELS_SHOWN], 1):
                self.p.say(f"  {i:>3}) {name}")
            if len(models) > MODELS_SHOWN:
                self.p.say(f"       ... and {len(models) - MODELS_SHOWN} more (type a name)")
        default = current if current and (not models or current in models) else ""
        default = default or (models[0] if models else "")
        while True:
            picked = self.p.ask("Model (number or name)", default)
            if models and picked.isdigit() and 1 <= int(picked) <= min(len(models), MODELS_SHOWN):
                picked = models[int(picked) - 1]
            if not picked:
                continue
            if models and picked in models:
                self.p.say(f"  ok: {picked}")
                return picked
            self.p.say(f"  checking {picked} with one short call...")
            ok, said = try_model(url, key, picked)
            self.p.say(f"  {'ok' if ok else 'not ok'}: {said}")
            if ok or self.p.yes("  Keep it anyway?"):
                return picked

    def owner(self) -> None:
        ids = [i for i in re.split(r"[,\s]+", self.get("ALLOWED_USER_IDS")) if i]
        self.p.say(
            "\nThe owner: your numeric Telegram id (@userinfobot tells it). The owner is asked "
            "when someone else wants to talk to the bot.\nOr type 'learn': whoever sends the "
            "bot its owner code privately becomes its owner (the code is shown next)."
        )
        while True:
            got = self.p.ask("Owner", ids[0] if ids else "learn")
            if got == "learn" or got.isdigit():
                break
            self.p.say("  a Telegram id is a number (or type 'learn')")
        if got == "learn":
            # Here: the access list's module brings the database layer, which the first
            # `make run`'s `setup --if-needed` (nothing to ask, most times) has no use for.
            from bot.access.gate import owner_code

            self.save({"ALLOWED_USER_IDS": ",".join(ids[1:])})
            token = self.get("TELEGRAM_BOT_TOKEN")
            code = owner_code(token) if token else "(printed by `sidekick run` at start)"
            self.p.say(f"  send the bot this owner code from your Telegram account: {code}")
            return
        rest = [i for i in ids if i != got]
        self.save({"ALLOWED_USER_IDS": ",".join([got, *rest])})

    def search(self) -> None:
        searxng, brave = self.get("SEARXNG_URL"), self.get("BRAVE_API_KEY")
        now = f"SearXNG {searxng}" if searxng else ("Brave" if brave else "off")
        self.p.say(f"\nWeb search (optional; now {now}):")
        self.p.say(
            "  1) SearXNG: the URL of your instance\n  2) Brave Search: an API key\n  3) none"
        )
        choice = self.p.ask("Choose 1-3", "keep")
        while choice in ("1", "2"):
            if choice == "1":
                searxng, brave = self.p.ask("SearXNG URL", searxng or "http://localhost:8888"), ""
            else:
                searxng, brave = "", self.p.secret("Brave Search API key", brave)
            self.p.say("  checking with one search...")
            ok, said = check_search(searxng, brave)
            self.p.say(f"  {'ok' if ok else 'not ok'}: {said}")
            if ok or self.p.yes("  Keep it anyway?"):
                break
            # Not kept: the choice again (another URL, the other backend, or none).
            choice = self.p.ask("Choose 1-3", choice)
        if choice == "keep":
            return
        if choice == "3":
            searxng = brave = ""
        self.save({"SEARXNG_URL": searxng or None, "BRAVE_API_KEY": brave or None})

    def summary(self) -> list[tuple[str, Callable[[], None]]]:
        v = self.get
        owner = (v("ALLOWED_USER_IDS").split(",")[0] or "learn from the first message").strip()
        search = (
            f"SearXNG {v('SEARXNG_URL')}"
            if v("SEARXNG_URL")
            else (f"Brave {mask(v('BRAVE_API_KEY'))}" if v("BRAVE_API_KEY") else "off")
        )
        key = f", key {mask(v('LLM_API_KEY'))}" if v("LLM_API_KEY") else ""
        return [
            (f"Telegram bot token  {mask(v('TELEGRAM_BOT_TOKEN'))}", self.telegram),
            (f"Model               {v('LLM_MODEL')} at {v('LLM_BASE_URL')}{key}", self.model),
            (f"Owner               {owner}", self.owner),
            (f"Web search          {search}", self.search),
        ]

    def run(self) -> None:
        self.p.say(f"Sidekick setup: settings go to {self.env.resolve()} (mode 600).")
        self.p.say("Enter keeps the value in [brackets]; secrets are typed without echo.")
        if not complete(self.values):
            for _, step in self.summary():
                step()
        else:
            while True:
                self.p.say("\nSet now (secrets masked):")
                items = self.summary()
                for i, (line, _) in enumerate(items, 1):
                    self.p.say(f"  {i}) {line}")
                choice = self.p.ask("Change which (1-4, Enter: done)", "done")
                if choice == "done":
                    break
                if choice.isdigit() and 1 <= int(choice) <= len(items):
                    items[int(choice) - 1][1]()
        self.p.say("\nDone. Start the bot with `make run` (or `sidekick run`); `sidekick doctor` "
                   "checks everything again.")  # fmt: skip


def complete(values: dict[str, str]) -> bool:
    """Whether the bot can start on these: a token, a model and, for an endpoint that needs
    one, a key. The example file names a model at OpenAI: a setup stopped after the token
    must not leave that as a working choice."""
    if not (values.get("TELEGRAM_BOT_TOKEN") and values.get("LLM_MODEL")):
        return False
    url = (values.get("LLM_BASE_URL") or DEFAULT_URL).rstrip("/")
    keyed = any(p.needs_key and p.url == url for p in PRESETS)
    return bool(values.get("LLM_API_KEY")) or not keyed


def run_setup(env: Path, *, if_needed: bool = False) -> int:
    # `if_needed` (the first `make run`): only when stdin is a terminal and .env cannot start
    # the bot.
    if if_needed:
        values = {**read_env(env), **{k: v for k, v in os.environ.items() if k.isupper() and v}}
        if complete(values) or not sys.stdin.isatty():
            return 0
        print(
            "sidekick: .env cannot start the bot yet (a bot token, a model and its key): "
            "let's set them up.",
            flush=True,
        )
    try:
        Wizard(env, Prompt()).run()
    except (KeyboardInterrupt, EOFError):
        print("\nsidekick: setup stopped; what was saved above is kept.", file=sys.stderr)
        return 130
    return 0
