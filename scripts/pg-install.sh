#!/usr/bin/env bash
# Makes sure PostgreSQL and pgvector are installed (for `make test-pg`); prints the bin dir.
# Debian's `postgresql` package, then its `postgresql-<major>-pgvector`. Debian 12 has no
# pgvector binary package: there pgvector is built from Debian's own source package
# (the next release's `pgvector`, fetched with apt-get source through a private list so the
# system's apt sources stay untouched) against postgresql-server-dev-<major>.
set -euo pipefail

say() { echo "pg-install: $*" >&2; }

bindir() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }

root=0; [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1 && root=1
updated=0
apt_update() { [ "$updated" = 1 ] || { apt-get update -qq >/dev/null; updated=1; }; }

bin=$(bindir || true)
if [ -z "$bin" ] || [ ! -x "$bin/initdb" ]; then
  [ "$root" = 1 ] || { say "PostgreSQL is not installed; as root: apt-get install postgresql postgresql-<major>-pgvector"; exit 1; }
  say "installing Debian's postgresql"
  apt_update
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
  bin=$(bindir)
fi
major=$(basename "$(dirname "$bin")")

if ! [ -f "/usr/share/postgresql/$major/extension/vector.control" ]; then
  [ "$root" = 1 ] || { say "pgvector is missing; as root: apt-get install postgresql-$major-pgvector"; exit 1; }
  apt_update
  if ! DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-$major-pgvector" >/dev/null 2>&1; then
    say "no postgresql-$major-pgvector package here; building Debian's pgvector source for PostgreSQL $major"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "postgresql-server-dev-$major" make gcc >/dev/null
    work=$(mktemp -d)
    trap 'rm -rf "$work"' EXIT
    mkdir -p "$work/lists/partial"
    echo "deb-src http://deb.debian.org/debian trixie main" >"$work/src.list"
    opts=(-o Dir::Etc::SourceList="$work/src.list" -o Dir::Etc::SourceParts=/dev/null
          -o Dir::State::Lists="$work/lists" -o Dir::Cache::pkgcache= -o Dir::Cache::srcpkgcache=)
    apt-get "${opts[@]}" update -qq >/dev/null
    (cd "$work" && apt-get "${opts[@]}" source --download-only -qq pgvector >/dev/null 2>&1)
    tar -xzf "$work"/pgvector_*.orig.tar.gz -C "$work"
    src=$(ls -d "$work"/pgvector-*/ | head -1)
    make -s -C "$src" PG_CONFIG="$bin/pg_config" OPTFLAGS="" >/dev/null
    make -s -C "$src" PG_CONFIG="$bin/pg_config" install >/dev/null
  fi
fi
echo "$bin"
