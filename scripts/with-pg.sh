#!/usr/bin/env bash
# `scripts/with-pg.sh CMD...`: a throwaway PostgreSQL cluster with pgvector, CMD run with
# DATABASE_URL pointing at it, and the cluster stopped and deleted afterwards, whatever the
# outcome (`make test-pg` runs the test suite this way, `make bench-pg` the benchmarks).
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$(scripts/pg-install.sh)
py=.venv/bin/python
port=$($py -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d /tmp/sidekick-pg.XXXXXX)
chmod 755 "$dir"
# PostgreSQL refuses to run as root: the cluster belongs to the `postgres` user then.
as=()
if [ "$(id -u)" = 0 ]; then
  id postgres >/dev/null 2>&1 || useradd --system --no-create-home postgres
  chown postgres "$dir"
  as=(runuser -u postgres --)
fi
stop() {
  "${as[@]}" "$bin/pg_ctl" -D "$dir/data" -m immediate stop >/dev/null 2>&1 || true
  rm -rf "$dir"
}
trap stop EXIT
trap "exit 130" INT TERM
"${as[@]}" "$bin/initdb" -D "$dir/data" -U sidekick --auth=trust -E UTF8 --no-sync >/dev/null
"${as[@]}" "$bin/pg_ctl" -D "$dir/data" -l "$dir/log" -w -o \
  "-p $port -k $dir -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300" \
  start >/dev/null
# Every database created from template1 (one per test) has the extension already.
"$bin/psql" -q -h 127.0.0.1 -p "$port" -U sidekick -d template1 -c "CREATE EXTENSION IF NOT EXISTS vector" >/dev/null
export DATABASE_URL="postgresql+asyncpg://sidekick@127.0.0.1:$port/postgres"
echo "with-pg: PostgreSQL $("$bin/pg_config" --version | awk '{print $2}') on 127.0.0.1:$port"
"$@"
