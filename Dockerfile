# Sidekick, the Telegram bot. `docker compose up` runs it next to a private SearXNG.
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    DATA_DIR=/data

# bubblewrap confines the code tool's runs; ca-certificates for HTTPS to Telegram and the LLM.
RUN apt-get update \
    && apt-get install -y --no-install-recommends bubblewrap ca-certificates tzdata \
    && rm -rf /var/lib/apt/lists/*

WORKDIR /app
COPY pyproject.toml README.md alembic.ini ./
COPY bot ./bot
COPY db ./db
COPY tools ./tools
COPY scheduler ./scheduler
COPY migrations ./migrations
RUN pip install . && sidekick --help > /dev/null

# The database, memories and code work dirs live here; keep it on a volume.
# 700: code the model writes runs under a throwaway uid and must not read the database.
RUN mkdir -p /data && chmod 700 /data
VOLUME /data

# Runs as root on purpose: without user namespaces (Docker's default seccomp profile) bwrap
# cannot start; the code tool then confines runs with Landlock (where the host kernel and
# Docker allow it) under a throwaway uid, which needs root. `sidekick doctor` names the mode.
CMD ["sidekick", "run"]
