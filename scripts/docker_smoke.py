"""The built image, run for real against the test suite's fake Telegram and model servers.

`python scripts/docker_smoke.py IMAGE` (scripts/test-docker.sh runs it): the fakes listen
on the host's 127.0.0.1, the container shares the host's network. Checks that a message is
answered, that `sidekick doctor` and `sidekick backup --verify` pass inside the container,
and that a configuration error leaves the container up, unhealthy and saying why, rather
than restarting in a loop. Removes every container it started.
"""

from __future__ import annotations

import asyncio
import os
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes.openai_server import FakeOpenAI
from tests.fakes.telegram_server import FakeTelegram, message_update

USER = 4242
DEADLINE_S = 180.0  # first start in a fresh container: migrations and the embedder's load


async def docker(*args: str, check: bool = True) -> str:
    proc = await asyncio.create_subprocess_exec(
        "docker", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
    )
    out, _ = await proc.communicate()
    text = out.decode(errors="replace")
    if check and proc.returncode != 0:
        raise SystemExit(f"docker {' '.join(args[:2])} failed ({proc.returncode}):\n{text}")
    return text


async def poll(what: str, probe: object, deadline_s: float = DEADLINE_S) -> None:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        if await probe():  # type: ignore[operator]
            return
        await asyncio.sleep(1)
    raise SystemExit(f"docker smoke: timed out waiting for {what}")


def step(text: str) -> None:
    print(f"test-docker: {text}", flush=True)


async def main(image: str) -> None:
    tg = await FakeTelegram().start()
    llm = await FakeOpenAI().start()
    name = f"sidekick-smoke-{os.getpid()}"
    env = {
        "TELEGRAM_BOT_TOKEN": tg.token,
        "TELEGRAM_API_URL": tg.base_url,
        "LLM_BASE_URL": llm.base_url,
        "LLM_API_KEY": "sk-smoke",
        "LLM_MODEL": "fake-model",
        "ALLOWED_USER_IDS": str(USER),
    }
    flags = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
    started = []
    try:
        started.append(name)
        await docker("run", "-d", "--name", name, "--network", "host", *flags, image)
        t0 = time.monotonic()
        await tg.push(message_update(USER, "hello from the smoke test"))

        async def answered() -> bool:
            return any("hello from the smoke test" in (m.text or "") for m in tg.sent_to(USER))

        try:
            await poll("an answer from the container", answered)
        except SystemExit:
            print(await docker("logs", name, check=False))
            raise
        step(f"message answered {time.monotonic() - t0:.1f}s after docker run")
        doctor = await docker("exec", name, "sidekick", "doctor", check=False)
        if "0 failed" not in doctor:
            raise SystemExit(f"sidekick doctor failed inside the container:\n{doctor}")
        step("sidekick doctor passes inside the container")
        backup = await docker("exec", name, "sidekick", "backup", "--verify")
        if "verified: integrity ok" not in backup:
            raise SystemExit(f"backup did not verify:\n{backup}")
        step("sidekick backup --verify passes inside the container")

        bad = f"{name}-bad"
        started.append(bad)
        await docker(
            "run", "-d", "--name", bad, "--network", "host", "--health-interval", "1s",
            "--restart", "unless-stopped", *flags, "-e", "LOG_LEVEL=loud", image,
        )  # fmt: skip

        async def unhealthy() -> bool:
            state = await docker(
                "inspect", "-f", "{{.State.Status}} {{.State.Health.Status}} {{.RestartCount}}",
                bad,
            )  # fmt: skip
            return state.split() == ["running", "unhealthy", "0"]

        await poll("the misconfigured container to turn unhealthy", unhealthy, 60)
        logs = await docker("logs", bad)
        if "configuration error: LOG_LEVEL" not in logs or "not restarting" not in logs:
            raise SystemExit(f"the configuration error is not in the logs:\n{logs}")
        t0 = time.monotonic()
        await docker("stop", "-t", "20", bad)
        step(
            "a configuration error: container up, unhealthy, not restarted, reason in the logs; "
            f"docker stop took {time.monotonic() - t0:.1f}s"
        )
    finally:
        for container in started:
            await docker("rm", "-f", "-v", container, check=False)
        await tg.stop()
        await llm.stop()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))
