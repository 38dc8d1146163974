"""The model relay of OpenCode jobs: the key is added on the bot's side, never handed to
the sandbox, and only the model's endpoints are passed on."""

from __future__ import annotations

import json
import stat
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest

from tests.fakes.openai_server import FakeOpenAI, Text
from tools.code.bun import locate_bun, probe_bun
from tools.code.opencode import Budget, OpenCodeInstall, OpenCodeRunner
from tools.code.relay import ModelRelay

KEY = "sk-relay-secret-0123456789"


@pytest.fixture
async def relay(fake_llm: FakeOpenAI) -> AsyncIterator[ModelRelay]:
    relay = ModelRelay(fake_llm.base_url, KEY)
    await relay.start()
    yield relay
    await relay.close()


def client(relay: ModelRelay) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(relay.socket))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:4141/v1")


async def test_the_key_is_added_on_the_way_and_the_stream_comes_back(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    fake_llm.add(Text("hello from the model"))
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with client(relay) as c:
        # What the sandbox sends: no key, or one of its own making; neither goes on.
        resp = await c.post(
            "/chat/completions", json=body, headers={"Authorization": "Bearer relay"}
        )
    assert resp.status_code == 200
    text = "".join(
        (json.loads(line[6:])["choices"] or [{}])[0].get("delta", {}).get("content") or ""
        for line in resp.text.splitlines()
        if line.startswith("data: {")
    )
    assert text == "hello from the model"
    assert fake_llm.authorizations == [f"Bearer {KEY}"]
    assert fake_llm.requests[-1]["messages"] == body["messages"]


async def test_only_the_models_endpoints_are_relayed(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    async with client(relay) as c:
        refused = await c.post("/audio/speech", json={"input": "x", "model": "m"})
        models = await c.get("/models")
    assert refused.status_code == 404 and fake_llm.speeches == []
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "fake-model"


async def test_the_socket_folder_cannot_be_listed_by_others(relay: ModelRelay) -> None:
    assert relay.folder is not None
    mode = stat.S_IMODE(relay.folder.stat().st_mode)
    assert mode & 0o044 == 0  # others may pass through (a job's uid), not list
    assert relay.socket.name.startswith("model-") and len(relay.socket.name) > 20


async def test_a_jobs_sandbox_is_given_the_endpoint_and_no_key(
    relay: ModelRelay, tmp_path: Path
) -> None:
    missing = tmp_path / "not-installed"
    install = OpenCodeInstall(missing, missing / "opencode", missing / "config", "1.0.0")
    runner = OpenCodeRunner(
        install,
        probe_bun(locate_bun()),
        relay,
        "fake-model",
        Budget(60, 2**30),
        network=False,
        egress=None,
    )
    plan = await runner.plan(tmp_path, None)
    everything = json.dumps([plan.argv, plan.env, plan.piped_args])
    assert KEY not in everything
    args = list(plan.piped_args)
    env = {args[i + 1]: args[i + 2] for i, a in enumerate(args) if a == "--setenv"}
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["sidekick"]["options"]
    assert provider["baseURL"] == "http://127.0.0.1:4141/v1" and KEY not in provider["apiKey"]
    assert env["SIDEKICK_MODEL_SOCKET"].endswith(relay.socket.name)
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert "--unshare-net" in args and "--clearenv" in args
