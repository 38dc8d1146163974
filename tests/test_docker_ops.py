"""The Docker files as operated: what `docker compose up -d` needs, where it listens, what
a configuration error does (`make test-docker` runs the image itself)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
ENTRYPOINT = ROOT / "docker" / "entrypoint.sh"
# The keys the Docker section (docs/operations.md) lists for .env.
DOCUMENTED = {
    "TELEGRAM_BOT_TOKEN",
    "ALLOWED_USER_IDS",
    "LLM_API_KEY",
    "LLM_MODEL",
    "SEARXNG_SECRET",
}


def test_default_compose_needs_only_the_documented_keys() -> None:
    text = (ROOT / "docker-compose.yml").read_text()
    # Compose interpolates every service, inactive profiles too, before it drops them:
    # a required ${VAR:?} anywhere is required for the default `up -d`.
    required = set(re.findall(r"\$\{(\w+):?\?", text))
    assert required <= DOCUMENTED, required - DOCUMENTED
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert all(key in docs for key in DOCUMENTED)


def test_lb_is_loopback_and_the_volume_has_the_name_the_docs_give() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    assert compose["services"]["lb"]["ports"] == ["${LB_BIND:-127.0.0.1}:8080:8080"]
    assert compose["volumes"]["sidekick-data"]["name"] == "sidekick-data"
    docs = (ROOT / "docs" / "operations.md").read_text()
    assert "sidekick-data" in docs and "docker compose logs -f" in docs


def test_dockerfile_base_and_certificates_are_build_arguments() -> None:
    dockerfile = (ROOT / "Dockerfile").read_text()
    assert dockerfile.index("ARG BASE_IMAGE=") < dockerfile.index("FROM ${BASE_IMAGE}")
    assert "ARG EXTRA_CA_CERTS" in dockerfile
    assert "-r requirements/run.lock" in dockerfile and "--no-deps ." in dockerfile
    assert "HEALTHCHECK" in dockerfile and 'ENTRYPOINT ["sidekick-entrypoint"]' in dockerfile


def entry(tmp_path: Path, code: int) -> subprocess.Popen[str]:
    env = {**os.environ, "SIDEKICK_CONFIG_ERROR_MARKER": str(tmp_path / "marker")}
    return subprocess.Popen(
        ["sh", str(ENTRYPOINT), "sh", "-c", f"echo working; exit {code}"],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def test_entrypoint_passes_other_exit_codes_through(tmp_path: Path) -> None:
    proc = entry(tmp_path, 1)
    assert proc.wait(timeout=30) == 1 and not (tmp_path / "marker").exists()


def test_entrypoint_stays_up_after_a_configuration_error(tmp_path: Path) -> None:
    proc = entry(tmp_path, 2)
    try:
        deadline = time.monotonic() + 30
        while not (tmp_path / "marker").exists() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert (tmp_path / "marker").exists() and proc.poll() is None  # up, marked unhealthy
    finally:
        proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=30) == 2  # and `docker stop` ends it at once
    assert "not restarting after a configuration error" in proc.stderr.read()  # type: ignore[union-attr]
