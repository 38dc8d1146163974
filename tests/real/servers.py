"""Real llama.cpp servers for the real tier and bench/prefix_cache.py.

`scripts/real_llm.py` (run by `make test-real`) installs the binary and the models and
writes their paths to a manifest; `manifest()` reads it. `LlamaServer` runs one server
process on a free loopback port; `stop()` always ends it (terminate, then kill).
"""

from __future__ import annotations

import ctypes
import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Any

import pytest

# CPU inference on a shared 2-core machine: a small context, one slot (so the second message
# of a session finds the first one's prompt in the slot's cache), two threads for prompts but
# one for generating: on a loaded machine two threads that sync per token took 6-8 s a token,
# one thread 1 s (measured side by side, load 10).
CHAT_ARGS = ["-c", "4096", "-t", "1", "-tb", "2", "-np", "1", "--jinja"]
# MiniLM reads at most 512 tokens; each input is one sequence of the batch.
EMBED_ARGS = ["--embeddings", "--pooling", "mean", "-c", "2048", "-b", "2048", "-ub", "512",
              "-t", "2", "-np", "4"]  # fmt: skip
START_TIMEOUT = 300.0


def cache_dir() -> Path:
    env = os.environ.get("SIDEKICK_REAL_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "sidekick-real"


def manifest() -> dict[str, str] | None:
    """The installed server and models, or None before `make test-real` installed them."""
    path = cache_dir() / "manifest.json"
    if not path.exists():
        return None
    data: dict[str, str] = json.loads(path.read_text())
    if not all(Path(data[k]).exists() for k in ("server", "chat_model", "embed_model")):
        return None
    return data


def _die_with_parent() -> None:
    """In the child, before exec: Linux ends it when the process that started it dies, even
    by SIGKILL (a killed test run must not leave a server eating both cores)."""
    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGTERM)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LlamaServer:
    def __init__(self, binary: str, model: str, args: list[str], log: Path, alias: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        cmd = [binary, "-m", model, "--host", "127.0.0.1", "--port", str(self.port),
               "--alias", alias, *args]  # fmt: skip
        env = {**os.environ, "LD_LIBRARY_PATH": str(Path(binary).parent)}
        self._out = log.open("wb")
        self.proc = subprocess.Popen(
            cmd, stdout=self._out, stderr=subprocess.STDOUT, env=env,
            preexec_fn=_die_with_parent if sys.platform == "linux" else None,
        )  # fmt: skip

    def wait_ready(self, timeout: float = START_TIMEOUT) -> LlamaServer:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                if self.proc.returncode == -signal.SIGILL:
                    # A CPU without AVX2 (the server's build needs it): nothing here runs it.
                    pytest.skip(
                        f"the prebuilt llama-server cannot run on this CPU: {self.tail(300)}"
                    )
                raise RuntimeError(f"llama-server exited ({self.proc.returncode}): {self.tail()}")
            try:
                with urllib.request.urlopen(f"{self.url}/health", timeout=5) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            time.sleep(0.5)
        raise TimeoutError(f"llama-server not ready after {timeout:.0f} s: {self.tail()}")

    def get(self, path: str) -> Any:
        with urllib.request.urlopen(f"{self.url}{path}", timeout=60) as r:
            return json.load(r)

    def post(self, path: str, body: dict[str, Any], timeout: float = 600) -> Any:
        req = urllib.request.Request(
            f"{self.url}{path}", json.dumps(body).encode(), {"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(req, timeout=timeout) as r:
            return json.load(r)

    def tail(self, n: int = 2000) -> str:
        try:
            return self.log.read_text(errors="replace")[-n:]
        except OSError:
            return ""

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._out.close()


def start_chat(m: dict[str, str], log: Path) -> LlamaServer:
    server = LlamaServer(m["server"], m["chat_model"], CHAT_ARGS, log, m["chat_model_name"])
    try:
        return server.wait_ready()
    except BaseException:
        server.stop()
        raise


def start_embed(m: dict[str, str], log: Path) -> LlamaServer:
    server = LlamaServer(m["server"], m["embed_model"], EMBED_ARGS, log, m["embed_model_name"])
    try:
        return server.wait_ready()
    except BaseException:
        server.stop()
        raise
