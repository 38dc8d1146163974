"""A small WebDriver client (the W3C protocol over HTTP, with httpx): Debian's chromium,
headless, driven by its chromedriver. Only what the browser tier needs: open a page, find,
click, type, read the page, take a screenshot."""

from __future__ import annotations

import asyncio
import base64
import shutil
import socket
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C element reference key
START_S = 60.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def installed() -> tuple[str, str] | None:
    """(chromium, chromedriver) when both are on PATH."""
    browser = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    return (browser, driver) if browser and driver else None


class WebDriverError(RuntimeError):
    pass


@dataclass
class Browser:
    http: httpx.AsyncClient
    session: str
    driver: subprocess.Popen[bytes]

    @classmethod
    async def start(cls, browser: str, driver: str, profile: Path) -> Browser:
        port = free_port()
        proc = subprocess.Popen(  # noqa: ASYNC220  (a daemon we stop in close())
            [driver, f"--port={port}"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        http = httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=START_S)
        try:
            await _ready(http, proc)
            options = {
                "binary": browser,
                "args": [
                    "--headless=new",
                    "--no-sandbox",  # root in CI containers
                    "--disable-gpu",
                    "--disable-dev-shm-usage",
                    "--window-size=1100,900",
                    f"--user-data-dir={profile}",
                ],
            }
            caps = {"alwaysMatch": {"browserName": "chrome", "goog:chromeOptions": options}}
            answer = await http.post("/session", json={"capabilities": caps})
            session = _value(answer)["sessionId"]
        except BaseException:
            await http.aclose()
            proc.kill()
            proc.wait()
            raise
        return cls(http, str(session), proc)

    async def close(self) -> None:
        try:
            await self.http.delete(f"/session/{self.session}")
        finally:
            await self.http.aclose()
            self.driver.terminate()
            try:
                self.driver.wait(10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()

    async def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        url = f"/session/{self.session}{path}"
        answer = await self.http.request(method, url, json=body if method == "POST" else None)
        return _value(answer)

    async def go(self, url: str) -> None:
        await self._call("POST", "/url", {"url": url})

    async def url(self) -> str:
        return str(await self._call("GET", "/url"))

    async def source(self) -> str:
        return str(await self._call("GET", "/source"))

    async def find(self, css: str) -> str:
        found = await self._call("POST", "/element", {"using": "css selector", "value": css})
        if not isinstance(found, dict) or ELEMENT not in found:
            raise WebDriverError(f"no element reference in {found!r:.200}")
        return str(found[ELEMENT])

    async def click(self, css: str) -> None:
        await self._call("POST", f"/element/{await self.find(css)}/click", {})

    async def type(self, css: str, text: str, *, clear: bool = True) -> None:
        element = await self.find(css)
        if clear:
            await self._call("POST", f"/element/{element}/clear", {})
        await self._call("POST", f"/element/{element}/value", {"text": text})

    async def text(self, css: str) -> str:
        return str(await self._call("GET", f"/element/{await self.find(css)}/text"))

    async def screenshot(self, path: Path) -> Path:
        data = await self._call("GET", "/screenshot")

        def save() -> None:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(base64.b64decode(data))

        await asyncio.to_thread(save)
        return path

    async def wait_for(self, css: str, timeout: float = START_S) -> None:  # noqa: ASYNC109
        """Until an element matching `css` is on the page (a page loads after a click)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                await self.find(css)
                return
            except WebDriverError:
                if loop.time() > deadline:
                    raise
                await asyncio.sleep(0.1)

    async def wait_text(self, css: str, part: str, timeout: float = START_S) -> str:  # noqa: ASYNC109
        """Until an element matching `css` holds `part` (the page after a click: the old
        one may still be shown, or be going away mid-read)."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            try:
                text = await self.text(css)
                if part in text:
                    return text
            except WebDriverError:
                pass
            if loop.time() > deadline:
                raise WebDriverError(f"no {css} holding {part!r}")
            await asyncio.sleep(0.1)


async def _ready(http: httpx.AsyncClient, proc: subprocess.Popen[bytes]) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + START_S
    while loop.time() < deadline:
        if proc.poll() is not None:
            raise WebDriverError(f"chromedriver exited with {proc.returncode}")
        try:
            if (await http.get("/status")).json()["value"]["ready"]:
                return
        except (httpx.HTTPError, ValueError, KeyError):
            pass
        await asyncio.sleep(0.1)
    raise WebDriverError("chromedriver did not start")


def _value(answer: httpx.Response) -> Any:
    body = answer.json()
    value = body.get("value") if isinstance(body, dict) else None
    if answer.status_code >= 400:
        error = value.get("error") if isinstance(value, dict) else answer.status_code
        msg = value.get("message", "") if isinstance(value, dict) else answer.text
        raise WebDriverError(f"{error}: {str(msg)[:300]}")
    return value


async def cdp(browser: Browser, cmd: str, params: dict[str, Any]) -> Any:
    """A DevTools command through chromedriver (a Mini App's Telegram object, blocked URLs)."""
    return await browser._call("POST", "/goog/cdp/execute", {"cmd": cmd, "params": params})
