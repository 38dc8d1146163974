"""The model relay of OpenCode jobs: the key is added on the bot's side, never handed to
the sandbox, and only the model's endpoints are passed on; each job's socket is its own;
only the bot's models, with its output limit; the calls are the user's, metered and
budgeted through the assembled app's metering, on their /model pick. And the job's folder
has a size cap."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import stat
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import httpx
import pytest

from db.repos.core import get_or_create_user
from tests.e2e.conftest import OWNER, TG, make_tg, telegram_server  # noqa: F401  (fixtures)
from tests.fakes.openai_server import FakeOpenAI, Text
from tests.test_usage import usage
from tools.chat import METERING
from tools.code import opencode
from tools.code.bun import locate_bun, probe_bun
from tools.code.jobs import JobManager
from tools.code.opencode import Budget, JobRun, OpenCodeInstall, OpenCodeRunner
from tools.code.relay import SOCKET_NAME, ModelRelay, RelayJob
from tools.code.relay_server import open_relay
from tools.model_call import ModelCall

KEY = "sk-relay-secret-0123456789"


JOB = RelayJob(ModelCall("code", user_id=None), ("fake-model",))


@pytest.fixture
async def relay(fake_llm: FakeOpenAI) -> AsyncIterator[ModelRelay]:
    relay = ModelRelay(fake_llm.base_url, KEY, max_output_tokens=4096)
    yield relay
    await relay.close()


def client(folder: Path) -> httpx.AsyncClient:
    transport = httpx.AsyncHTTPTransport(uds=str(folder / SOCKET_NAME))
    return httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:4141/v1")


async def test_the_key_is_added_on_the_way_and_the_stream_comes_back(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    fake_llm.add(Text("hello from the model"))
    body = {"model": "fake-model", "stream": True, "messages": [{"role": "user", "content": "hi"}]}
    async with client(await open_relay(relay, JOB, None)) as c:
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
    async with client(await open_relay(relay, JOB, None)) as c:
        refused = await c.post("/audio/speech", json={"input": "x", "model": "m"})
        models = await c.get("/models")
    assert refused.status_code == 404 and fake_llm.speeches == []
    assert models.status_code == 200 and models.json()["data"][0]["id"] == "fake-model"


async def test_only_the_bots_models_and_never_more_output_than_its_own_calls(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    """A job (or code in its sandbox talking to the relay itself) may not pick a dearer
    model the endpoint happens to have, nor ask for more output than LLM_MAX_OUTPUT_TOKENS."""
    fake_llm.models = ["fake-model", "dear-model"]
    job = RelayJob(ModelCall("code"), ("fake-model", "other-model"))
    messages = [{"role": "user", "content": "hi"}]
    async with client(await open_relay(relay, job, None)) as c:
        listed = (await c.get("/models")).json()["data"]
        dear = await c.post("/chat/completions", json={"model": "dear-model", "messages": messages})
        fake_llm.add(Text("one"), Text("two"), Text("three"))
        big = {"model": "fake-model", "messages": messages, "max_tokens": 200_000}
        assert (await c.post("/chat/completions", json=big)).status_code == 200
        unbounded = {"model": "other-model", "messages": messages}
        assert (await c.post("/chat/completions", json=unbounded)).status_code == 200
        small = {"model": "fake-model", "messages": messages, "max_completion_tokens": 50}
        assert (await c.post("/chat/completions", json=small)).status_code == 200
    assert [m["id"] for m in listed] == ["fake-model", "other-model"]
    assert dear.status_code == 403 and "not offered" in dear.json()["error"]["message"]
    sent = fake_llm.requests[-3:]
    assert [r["model"] for r in sent] == ["fake-model", "other-model", "fake-model"]
    assert sent[0]["max_tokens"] == 4096 and sent[1]["max_tokens"] == 4096
    assert sent[2]["max_completion_tokens"] == 50 and "max_tokens" not in sent[2]
    assert len(fake_llm.requests) == 3  # the refused call never left


async def test_a_jobs_socket_is_its_own_and_closed_to_everyone_else(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    folder = await open_relay(relay, JOB, None)
    sock = folder / SOCKET_NAME
    assert stat.S_IMODE(folder.stat().st_mode) == 0o700
    assert stat.S_IMODE(sock.stat().st_mode) == 0o600
    assert sock.stat().st_uid == os.getuid()
    other = await open_relay(relay, JOB, None)
    assert other != folder  # one socket per job
    await relay.release(folder)
    assert not folder.exists() and (other / SOCKET_NAME).exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="a job's own uid needs root")
async def test_another_local_account_cannot_use_a_jobs_socket(
    relay: ModelRelay, fake_llm: FakeOpenAI
) -> None:
    """As root each job runs as a throwaway uid: its socket is that uid's, and a third
    account (here `nobody`) cannot connect to spend the key."""
    job_uid, stranger = 61234, 65534
    folder = await open_relay(relay, JOB, job_uid)
    sock = folder / SOCKET_NAME
    assert (folder.stat().st_uid, sock.stat().st_uid) == (job_uid, job_uid)

    def connect_as(uid: int) -> str:
        """A child that becomes `uid` and connects (a fork: the venv's python may not be
        executable by that account)."""
        pid = os.fork()
        if pid == 0:  # the child: only system calls, then out
            code = 1
            try:
                os.setgid(uid)
                os.setuid(uid)
                with socket.socket(socket.AF_UNIX) as s:
                    s.connect(str(sock))
                code = 0
            except PermissionError:
                code = 13
            finally:
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        return {0: "connected", 13: "PermissionError"}.get(os.waitstatus_to_exitcode(status), "?")

    assert connect_as(stranger) == "PermissionError"
    assert connect_as(job_uid) == "connected"


async def test_relay_calls_are_the_users_metered_and_budgeted(
    make_tg: Callable[..., Awaitable[TG]],  # noqa: F811
) -> None:
    """Through the assembled app's metering (the usage feature's part): a job's calls show
    in the user's /usage as code generation, and count against their token cap."""
    tg = await make_tg(user_token_cap="1000/day")
    meter = tg.app.part(METERING)
    assert tg.app.deps.maybe(METERING) is meter  # what the code tool's relay is given
    await tg.send(OWNER, "hello")
    assert (await tg.reply(OWNER)).text == "echo: hello"
    async with tg.app.session_factory.begin() as s:
        user = await get_or_create_user(s, OWNER, "Owner", tg.app.deps.clock())
    relay = ModelRelay(tg.llm.base_url, KEY, metering=meter)
    job = RelayJob(ModelCall("code", user.id), ("fake-model",))
    body = {
        "model": "fake-model",
        "stream": True,
        "stream_options": {"include_usage": True},
        "messages": [{"role": "user", "content": "write it"}],
    }
    try:
        async with client(await open_relay(relay, job, None)) as c:
            tg.llm.add(Text("done", usage=usage(1200, 30)))
            first = await c.post("/chat/completions", json=body)
            assert first.status_code == 200
            second = await c.post("/chat/completions", json=body)
    finally:
        await relay.close()
    assert second.status_code == 403
    assert "You have used your 1,000 tokens for today" in second.json()["error"]["message"]
    assert sum(r["messages"][-1]["content"] == "write it" for r in tg.llm.requests) == 1
    await tg.send(OWNER, "/usage")
    report = (await tg.replies(OWNER, 2))[1].text or ""
    assert "code generation — 1 call" in report and "1,200" in report


async def test_a_jobs_model_is_the_users_pick(
    make_tg: Callable[..., Awaitable[TG]],  # noqa: F811
    tmp_path: Path,
) -> None:
    tg = await make_tg(llm_model="fake-model, big-model")
    await tg.send(OWNER, "/model big-model")
    assert (await tg.reply(OWNER)).text == "Your model is now big-model."
    async with tg.app.session_factory.begin() as s:
        owner = await get_or_create_user(s, OWNER, "Owner", tg.app.deps.clock())
    endpoint = tg.app.deps.endpoint
    assert endpoint is not None
    missing = tmp_path / "not-installed"
    install = OpenCodeInstall(missing, missing / "opencode", missing / "config", "1.0.0")
    runner = OpenCodeRunner(
        install, probe_bun(locate_bun()), ModelRelay(endpoint.base_url, KEY),
        endpoint.model, Budget(60, 2**30), network=False, egress=None, others=endpoint.others,
    )  # fmt: skip
    jobs = JobManager(
        tg.app.session_factory, tg.app.deps.llm, tg.app.deps.clock,
        opencode=runner, metering=tg.app.deps.maybe(METERING),
    )  # fmt: skip
    mine = await jobs.relay_job(ModelCall("code", owner.id))
    assert mine.models == ("big-model", "fake-model")
    others = await jobs.relay_job(ModelCall("code", owner.id + 1000))
    assert others.models == ("fake-model", "big-model")


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
    folder = await open_relay(relay, JOB, None)
    plan = await runner.plan(tmp_path, None, folder, "fake-model")
    everything = json.dumps([plan.argv, plan.env, plan.piped_args])
    assert KEY not in everything
    args = list(plan.piped_args)
    env = {args[i + 1]: args[i + 2] for i, a in enumerate(args) if a == "--setenv"}
    config = json.loads(env["OPENCODE_CONFIG_CONTENT"])
    provider = config["provider"]["sidekick"]["options"]
    assert provider["baseURL"] == "http://127.0.0.1:4141/v1" and KEY not in provider["apiKey"]
    assert env["SIDEKICK_MODEL_SOCKET"].endswith(f"/{SOCKET_NAME}")
    binds = [(args[i + 1], args[i + 2]) for i, a in enumerate(args) if a == "--ro-bind"]
    assert (str(folder), "/run/sidekick-model") in binds
    assert env["OPENCODE_DISABLE_MODELS_FETCH"] == "1"
    assert "--unshare-net" in args and "--clearenv" in args


async def test_a_job_that_fills_its_folder_is_stopped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The work dir is on the host's disk: past its cap the whole sandbox ends (here a
    process group standing in for it, the cap shrunk to 1 MiB)."""
    monkeypatch.setattr(opencode, "JOB_DISK_BYTES", 2**20)
    work = tmp_path / "work"
    work.mkdir()
    proc = await asyncio.create_subprocess_exec("sleep", "600", start_new_session=True)
    result = JobRun(None, "")
    watcher = asyncio.create_task(opencode.watch_disk(work, proc.pid, result))
    try:
        for i in range(3):
            (work / f"part{i}.bin").write_bytes(os.urandom(2**19))
        await asyncio.wait_for(proc.wait(), 60)
    finally:
        watcher.cancel()
        if proc.returncode is None:
            proc.kill()
            await proc.wait()
    assert result.disk_exceeded and proc.returncode == -9
