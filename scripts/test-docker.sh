#!/usr/bin/env bash
# `make test-docker`: the Docker image built and run for real, then everything it started
# removed again.
#  1. Docker: Debian's docker.io is installed when missing (as root); when no engine answers,
#     one is started for this run (own data root and socket under a temp dir, no iptables).
#  2. The Dockerfile's base image, or where no registry answers, a Debian base made with
#     `debootstrap --variant=minbase bookworm` and `docker import` (cached in
#     ~/.cache/sidekick, so a rerun skips it).
#  3. The project image, with this machine's extra CA certificates (those added under
#     /usr/local/share/ca-certificates, e.g. a proxy that re-signs TLS) as EXTRA_CA_CERTS.
#  4. scripts/docker_smoke.py: the container against the test suite's fake Telegram and model
#     servers (a message answered, doctor and backup --verify inside, a config error shown).
#  5. `docker compose config` on a .env holding only the keys the README lists.
set -euo pipefail
cd "$(dirname "$0")/.."
say() { echo "test-docker: $*"; }
t_start=$(date +%s)
cache=${XDG_CACHE_HOME:-$HOME/.cache}/sidekick
work=$(mktemp -d /tmp/sidekick-docker.XXXXXX)
image=sidekick:test-$$
base_tag=sidekick-base:bookworm
own_daemon=
base_made=

cleanup() {
  set +e
  docker rmi -f "$image" >/dev/null 2>&1
  [ -n "$base_made" ] && docker rmi -f "$base_tag" >/dev/null 2>&1
  if [ -n "$own_daemon" ] && [ -f "$work/dockerd.pid" ]; then
    kill "$(cat "$work/dockerd.pid")" 2>/dev/null
    for _ in $(seq 60); do [ -f "$work/dockerd.pid" ] || break; sleep 0.5; done
    # The engine leaves its network namespace mounted under its exec root.
    awk -v w="$work" 'index($2, w) == 1 {print $2}' /proc/mounts | sort -r | xargs -r -n1 umount -l
  fi
  rm -rf "$work"
  say "cleaned up ($(( $(date +%s) - t_start ))s in all)"
}
trap cleanup EXIT
trap "exit 130" INT TERM

# Debian packages this needs, as root, saying so first (apt's lists are refreshed only when
# the first try fails).
apt_install() {
  [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 || {
    say "missing $*: install it (e.g. sudo apt-get install $*) and run again" >&2; exit 1; }
  say "installing Debian's $* with apt-get (as root)"
  apt-get install -y -qq "$@" >>"$work/apt.log" 2>&1 \
    || { apt-get update -qq >>"$work/apt.log" 2>&1 && apt-get install -y -qq "$@" >>"$work/apt.log" 2>&1; } \
    || { tail -20 "$work/apt.log" >&2; exit 1; }
}

# 1. The engine.
if ! command -v dockerd >/dev/null 2>&1 && ! docker info >/dev/null 2>&1; then
  apt_install docker.io
fi
if ! docker info >/dev/null 2>&1; then
  say "starting dockerd for this run (data root $work/root, no iptables)"
  dockerd --iptables=false --bridge=none --data-root "$work/root" --exec-root "$work/exec" \
    -H "unix://$work/docker.sock" --pidfile "$work/dockerd.pid" >"$work/dockerd.log" 2>&1 &
  own_daemon=1
  export DOCKER_HOST="unix://$work/docker.sock"
  for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 0.5; done
  docker info >/dev/null 2>&1 || { tail -20 "$work/dockerd.log" >&2; exit 1; }
fi

# 2. The base image.
base=$(sed -n 's/^ARG BASE_IMAGE=//p' Dockerfile)
if ! docker image inspect "$base" >/dev/null 2>&1 \
   && ! timeout 60 docker pull -q "$base" >/dev/null 2>&1; then
  tarball=$cache/bookworm-minbase.tar.gz
  if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null 2>&1 || apt_install debootstrap
    say "$base cannot be pulled: making a Debian bookworm base with debootstrap (cached in $cache)"
    mkdir -p "$cache"
    debootstrap --variant=minbase bookworm "$work/rootfs" http://deb.debian.org/debian >"$work/debootstrap.log" 2>&1 \
      || { tail -20 "$work/debootstrap.log" >&2; exit 1; }
    tar -C "$work/rootfs" -c . | gzip -1 >"$tarball.partial" && mv "$tarball.partial" "$tarball"
    rm -rf "$work/rootfs"
  fi
  docker image inspect "$base_tag" >/dev/null 2>&1 || { docker import "$tarball" "$base_tag" >/dev/null; base_made=1; }
  base=$base_tag
  say "base image: $base (from $tarball)"
fi

# 3. The project image. The legacy builder: Debian's engine has no BuildKit plugin.
extra_ca=$(cat /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)
say "building the image on $base"
t0=$(date +%s)
DOCKER_BUILDKIT=0 docker build -q --network host --build-arg BASE_IMAGE="$base" \
  --build-arg EXTRA_CA_CERTS="$extra_ca" -t "$image" . >"$work/build.log" 2>&1 \
  || { tail -30 "$work/build.log" >&2; exit 1; }
say "image built in $(( $(date +%s) - t0 ))s ($(docker image inspect -f '{{.Size}}' "$image" | awk '{printf "%d MB", $1/1e6}'))"

# 4. Run it against the fakes.
.venv/bin/python scripts/docker_smoke.py "$image"

# 5. Compose with only the documented keys (compose v2, else Debian's docker-compose v1).
if docker compose version >/dev/null 2>&1; then compose=(docker compose);
elif command -v docker-compose >/dev/null 2>&1; then compose=(docker-compose);
else
  apt_install docker-compose
  compose=(docker-compose)
fi
mkdir -p "$work/compose/docker"
cp docker-compose.yml "$work/compose/"
cp -r docker/searxng docker/nginx "$work/compose/docker/"
cat >"$work/compose/.env" <<'EOF'
TELEGRAM_BOT_TOKEN=123456:ABC-documented-keys-only
ALLOWED_USER_IDS=42
LLM_BASE_URL=https://api.openai.com/v1
LLM_API_KEY=sk-x
LLM_MODEL=gpt-4o-mini
SEARXNG_SECRET=0123456789abcdef
EOF
(cd "$work/compose" && "${compose[@]}" config >"$work/compose.out" 2>&1) \
  || { cat "$work/compose.out" >&2; say "docker compose config failed with only the documented keys" >&2; exit 1; }
(cd "$work/compose" && "${compose[@]}" --profile scale config >"$work/compose.out" 2>&1) \
  || { cat "$work/compose.out" >&2; say "the scale profile's config failed" >&2; exit 1; }
grep -q "127.0.0.1" "$work/compose.out" || { say "lb is not bound to 127.0.0.1" >&2; exit 1; }
say "${compose[*]} config: ok with only the documented keys"
