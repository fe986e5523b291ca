#!/usr/bin/env bash
# A throwaway PostgreSQL server for the tests and the benchmark:
#   tools/postgres.sh start DIR   initdb a cluster in DIR, start it on a free
#                                 loopback port, create database colikv, and
#                                 print its URI (also written to DIR/uri)
#   tools/postgres.sh stop DIR    stop it (pg_ctl stop -m fast) and remove DIR
#   tools/postgres.sh uri DIR     print the URI of a started cluster
#   tools/postgres.sh pg_ctl DIR ARGS...   pg_ctl on it as its owner (the fault tests)
# The server refuses to run as root: as root the cluster belongs to the
# unprivileged user `postgres` (Debian's package creates it). Clients log in
# as user colikv with a random password (scram-sha-256), over TCP on 127.0.0.1
# only. PG_BIN overrides the server's binaries (default: Debian's PostgreSQL 15).
set -euo pipefail

PG_BIN=${PG_BIN:-$(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -n 1)}

usage() {
  sed -n '2,8p' "$0" | sed 's/^# \{0,1\}//'
  exit 2
}

# Runs a server binary as the cluster's owner.
as_owner() {
  if [ "$(id -u)" -eq 0 ]; then
    runuser -u postgres -- "$@"
  else
    "$@"
  fi
}

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

start() {
  local dir=$1
  [ -x "$PG_BIN/initdb" ] || { echo "postgres.sh: no PostgreSQL server in '$PG_BIN' (Debian package postgresql)" >&2; exit 1; }
  mkdir -p "$dir"
  dir=$(cd "$dir" && pwd)
  [ -z "$(ls -A "$dir")" ] || { echo "postgres.sh: $dir is not empty" >&2; exit 1; }
  [ "$(id -u)" -ne 0 ] || chown postgres: "$dir"
  chmod 700 "$dir"
  local password port
  password=$(python3 -c 'import secrets; print(secrets.token_hex(16))')
  printf '%s\n' "$password" > "$dir/.pw"
  [ "$(id -u)" -ne 0 ] || chown postgres: "$dir/.pw"
  as_owner "$PG_BIN/initdb" -D "$dir/data" -U colikv --pwfile="$dir/.pw" --auth=scram-sha-256 \
    -E UTF8 --locale=C.UTF-8 > "$dir/initdb.log" 2>&1 \
    || { cat "$dir/initdb.log" >&2; exit 1; }
  rm -f "$dir/.pw"
  port=$(free_port)
  # In the cluster's own configuration, so that a restart (pg_ctl start) keeps it.
  printf "listen_addresses = '127.0.0.1'\nport = %s\nunix_socket_directories = '%s'\nmax_connections = 200\n" \
    "$port" "$dir" | as_owner tee -a "$dir/data/postgresql.conf" > /dev/null
  as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" -w -t 60 start > /dev/null \
    || { cat "$dir/server.log" >&2; exit 1; }
  PGPASSWORD=$password "$PG_BIN/psql" -X -q -h 127.0.0.1 -p "$port" -U colikv -d postgres \
    -c "CREATE DATABASE colikv" > /dev/null
  local uri="postgresql://colikv:$password@127.0.0.1:$port/colikv"
  printf '%s\n' "$uri" > "$dir/uri"
  echo "$uri"
}

stop() {
  local dir=$1
  [ -d "$dir/data" ] || { echo "postgres.sh: no cluster in $dir" >&2; exit 1; }
  as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -m fast -w stop > /dev/null 2>&1 || true
  rm -rf "$dir"
}

cmd=${1:-}
case "$cmd" in
  start) [ $# -eq 2 ] || usage; start "$2" ;;
  stop) [ $# -eq 2 ] || usage; stop "$2" ;;
  uri) [ $# -eq 2 ] || usage; cat "$2/uri" ;;
  pg_ctl) [ $# -ge 3 ] || usage; dir=$2; shift 2; as_owner "$PG_BIN/pg_ctl" -D "$dir/data" -l "$dir/server.log" "$@" ;;
  *) usage ;;
esac
