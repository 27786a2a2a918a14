#!/bin/sh
# Entry point of localhost/paddock-postgres:17 (postgres.Containerfile): the official image's
# contract, reduced: as root it takes ownership of PGDATA and drops to `postgres`; an empty PGDATA
# is initialised with POSTGRES_USER (postgres) / POSTGRES_PASSWORD (required) / POSTGRES_DB (the
# user's name), password (scram-sha-256) authentication for every network client.
# Any other command (pg_dump, psql, a shell) runs as given, as in the official image.
set -eu
if [ "${1:-}" != postgres ]; then
  exec "$@"
fi
: "${PGDATA:=/var/lib/postgresql/data}"
if [ "$(id -u)" = 0 ]; then
  mkdir -p "$PGDATA"
  chown -R postgres:postgres "$PGDATA"
  chmod 700 "$PGDATA"
  exec setpriv --reuid=postgres --regid=postgres --init-groups "$0" "$@"
fi
if [ ! -s "$PGDATA/PG_VERSION" ]; then
  if [ -z "${POSTGRES_PASSWORD:-}" ]; then
    echo "postgres-entrypoint: POSTGRES_PASSWORD is required to initialise $PGDATA" >&2
    exit 1
  fi
  user="${POSTGRES_USER:-postgres}"
  pwfile=$(mktemp)
  printf '%s\n' "$POSTGRES_PASSWORD" >"$pwfile"
  initdb --username="$user" --pwfile="$pwfile" --auth-local=trust --auth-host=scram-sha-256 \
    --encoding=UTF8 --locale=C -D "$PGDATA" >/dev/null
  rm -f "$pwfile"
  printf '%s\n' "host all all 0.0.0.0/0 scram-sha-256" "host all all ::/0 scram-sha-256" >>"$PGDATA/pg_hba.conf"
  db="${POSTGRES_DB:-$user}"
  if [ "$db" != postgres ]; then
    postgres --single -D "$PGDATA" -j postgres >/dev/null <<SQL
CREATE DATABASE "$db" OWNER "$user";
SQL
  fi
  echo "postgres-entrypoint: initialised $PGDATA (user $user, database $db)" >&2
fi
shift
exec postgres -D "$PGDATA" -c listen_addresses='*' -c unix_socket_directories=/var/run/postgresql "$@"
