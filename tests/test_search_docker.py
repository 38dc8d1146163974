"""Docker files parse and say what the README promises (no Docker engine runs here)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent


def load(rel: str) -> Any:
    return yaml.safe_load((ROOT / rel).read_text(encoding="utf-8"))


def test_compose_runs_the_bot_with_searxng_on_the_private_network() -> None:
    compose = load("docker-compose.yml")
    bot, searx = compose["services"]["sidekick"], compose["services"]["searxng"]
    assert bot["build"] == "."
    assert bot["environment"]["SEARXNG_URL"] == "http://searxng:8080"
    assert bot["environment"]["DATA_DIR"] == "/data"
    assert "sidekick-data:/data" in bot["volumes"] and "sidekick-data" in compose["volumes"]
    assert "searxng" in bot["depends_on"]
    assert searx["image"].startswith("searxng/searxng")
    assert "ports" not in searx  # reachable only inside the compose network
    assert "SEARXNG_SECRET" in searx["environment"]["SEARXNG_SECRET"]  # ${...:?} from .env
    mount = next(v for v in searx["volumes"] if "settings.yml" in v)
    source, target = mount.split(":")[:2]
    assert (ROOT / source).is_file() and target == "/etc/searxng/settings.yml"


def test_searxng_settings_enable_json_and_disable_the_limiter() -> None:
    settings = load("docker/searxng/settings.yml")
    assert "json" in settings["search"]["formats"]
    assert settings["server"]["limiter"] is False
    assert settings["use_default_settings"] is True
    assert "secret_key" not in settings["server"]  # it comes from SEARXNG_SECRET


def test_the_image_copies_every_package_pip_installs() -> None:
    """What breaks an image without Docker noticing here: a package pyproject installs but
    the Dockerfile never copies (pip install . then ships without it), or a COPY of a path
    that does not exist (the build fails). Read both files and compare."""
    import tomllib

    pyproject = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    wanted = {p.rstrip("*") for p in pyproject["tool"]["setuptools"]["packages"]["find"]["include"]}
    copies: dict[str, str] = {}
    for line in (ROOT / "Dockerfile").read_text(encoding="utf-8").splitlines():
        if line.startswith("COPY "):
            *sources, target = line.split()[1:]
            for src in sources:
                assert (ROOT / src).exists(), f"the Dockerfile copies {src}, which does not exist"
                copies[src] = target
    missing = sorted(p for p in wanted if p not in copies)
    assert not missing, f"pyproject installs {missing} but the Dockerfile does not copy them"
    assert "pyproject.toml" in copies and "alembic.ini" in copies


def test_dockerignore_keeps_secrets_and_data_out() -> None:
    ignored = (ROOT / ".dockerignore").read_text(encoding="utf-8").splitlines()
    for entry in (".env", "data/", ".venv/", ".git/"):
        assert entry in ignored


def test_compose_scale_profile_runs_two_workers_on_postgres() -> None:
    services = load("docker-compose.yml")["services"]
    workers = [services["worker-1"], services["worker-2"]]
    assert services["postgres"]["image"].startswith("pgvector/pgvector")
    for w in workers:
        assert w["profiles"] == ["scale"]
        assert w["environment"]["DATABASE_URL"].startswith("postgresql+asyncpg://")
        assert w["depends_on"]["postgres"]["condition"] == "service_healthy"
    assert "profiles" not in services["sidekick"]  # plain `docker compose up` is unchanged
    conf = (ROOT / "docker/nginx/workers.conf").read_text()
    assert "worker-1:8080" in conf and "worker-2:8080" in conf
