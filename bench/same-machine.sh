#!/usr/bin/env bash
# The client phase (bench/clients.ts) on an old release and on this checkout, one after the other on
# this machine, so that the comparison is not skewed by the machine's speed on another day:
#
#   bench/same-machine.sh [--old-ref REF | --old-checkout DIR] [--old-api VERSION] [--clients-pending N] [--json-dir DIR] [-- bench:ws options]
#
#   --old-ref REF        the old release's commit (default aac64f2, the last commit before 0.1.0 was
#                        cut): checked out in a temporary git worktree with `npm ci` (about a minute),
#                        removed at the end
#   --old-checkout DIR   instead, a checkout of the old release with its node_modules installed
#   --old-api VERSION    the documents it accepts, bench:ws's --api (default 0.1.0)
#   --clients-pending N  the pending queue of both runs (default 10000)
#   --json-dir DIR       keep both runs' results there (old.json, current.json); by default they are deleted
#   after --              more options for both bench:ws runs (e.g. --workers 1000 --clients-concurrency 16)
#
# Each server is started from its checkout with its own package.json `start` command (run as npm would,
# with its node_modules/.bin on the PATH, but exec'd so that its PID is the node process measured), on a
# free port, on a fresh database (tagsched_same_old, then tagsched_same_current), with a known admin
# token, TAGSCHED_SCHEDULER=manual (0.1.0 has that setting too, under the same name: src/core/config.ts
# there), NODE_ENV=production, LOG_LEVEL=warn, and an acknowledgement timeout of 600 s, as bench:ws
# gives the server it forks. The old server is measured first (`bench:ws --only clients --external-url
# … --api 0.1.0`), stopped and its database dropped; then this checkout's, compared with the old run's
# figures (--baseline-json). Both tables and the comparison go to stdout; the servers' logs go to a
# temporary directory, printed when a server fails to start. Needs psql and curl; the PostgreSQL server
# is BENCH_DATABASE_URL's (default postgres://root@127.0.0.1:5432/postgres).
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
old_ref=aac64f2
old_checkout=
old_api=0.1.0
pending=10000
json_dir=
extra=()
while [ $# -gt 0 ]; do
  case "$1" in
    --old-ref) old_ref=$2; shift 2 ;;
    --old-checkout) old_checkout=$2; shift 2 ;;
    --old-api) old_api=$2; shift 2 ;;
    --clients-pending) pending=$2; shift 2 ;;
    --json-dir) json_dir=$2; shift 2 ;;
    --) shift; extra=("$@"); break ;;
    *) echo "same-machine.sh: unknown argument $1 (see the header of $0)" >&2; exit 2 ;;
  esac
done
made_worktree=
admin_url=${BENCH_DATABASE_URL:-postgres://root@127.0.0.1:5432/postgres}
export PGOPTIONS='--client-min-messages=warning' # no NOTICE for a database that is not there to drop
db_url() { node -e 'const u = new URL(process.argv[1]); u.pathname = "/" + process.argv[2]; console.log(u.toString())' "$admin_url" "$1"; }
token="tsk_admin_same-machine-$(od -An -N16 -tx1 /dev/urandom | tr -d ' \n')"
work=$(mktemp -d -t tagsched-same-machine.XXXXXX)
server_pid=
databases=(tagsched_same_old tagsched_same_current)

stop_server() {
  if [ -n "$server_pid" ] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid"
    for _ in $(seq 1 100); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server_pid" 2>/dev/null && kill -KILL "$server_pid"
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
drop_database() { psql -q "$admin_url" -c "drop database if exists \"$1\" with (force)" >/dev/null; }
cleanup() {
  stop_server
  for db in "${databases[@]}"; do drop_database "$db" || true; done
  if [ -n "$json_dir" ]; then mkdir -p "$json_dir" && cp "$work"/*.json "$json_dir"/ 2>/dev/null || true; fi
  rm -rf "$work"
  if [ -n "$made_worktree" ]; then git -C "$here" worktree remove --force "$made_worktree" >/dev/null 2>&1 || rm -rf "$made_worktree"; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ -z "$old_checkout" ]; then
  git -C "$here" rev-parse --verify --quiet "$old_ref^{commit}" >/dev/null || { echo "same-machine.sh: no commit $old_ref in this clone" >&2; exit 2; }
  old_checkout=$(mktemp -d -t tagsched-old.XXXXXX)
  made_worktree=$old_checkout
  echo "same-machine: checking out $old_ref in $old_checkout and installing its dependencies" >&2
  git -C "$here" worktree add --detach "$old_checkout" "$old_ref" >/dev/null 2>&1
  (cd "$old_checkout" && npm ci --no-audit --no-fund --loglevel=error >&2)
fi
old_checkout=$(cd "$old_checkout" && pwd)
[ -f "$old_checkout/package.json" ] && [ -d "$old_checkout/node_modules" ] || { echo "same-machine.sh: $old_checkout is not a checkout with node_modules" >&2; exit 2; }


# start_server NAME CHECKOUT DATABASE: sets server_pid and server_url.
start_server() {
  local name=$1 checkout=$2 database=$3 port start db
  drop_database "$database"
  psql -q "$admin_url" -c "create database \"$database\"" >/dev/null
  db=$(db_url "$database")
  port=$(node -e 'const s = require("net").createServer(); s.listen(0, "127.0.0.1", () => { console.log(s.address().port); s.close(); })')
  start=$(cd "$checkout" && node -p 'require("./package.json").scripts.start')
  echo "same-machine: starting $name ($checkout at $(git -C "$checkout" rev-parse --short HEAD)): $start, port $port, database $database" >&2
  (
    cd "$checkout"
    export PATH="$checkout/node_modules/.bin:$PATH" DATABASE_URL="$db" PORT="$port" HOST=127.0.0.1 LOG_LEVEL=warn NODE_ENV=production \
      TAGSCHED_ADMIN_TOKEN="$token" TAGSCHED_SECRET_KEY=same-machine-secret-key TAGSCHED_SCHEDULER=manual \
      TAGSCHED_ACK_TIMEOUT_SECONDS=600 TAGSCHED_DATA_DIR="$work/data-$name"
    exec bash -c "exec $start"
  ) >"$work/$name.log" 2>&1 &
  server_pid=$!
  server_url="http://127.0.0.1:$port/graphql"
  for _ in $(seq 1 600); do
    if ! kill -0 "$server_pid" 2>/dev/null; then
      echo "same-machine: the $name server exited; its log:" >&2
      cat "$work/$name.log" >&2
      exit 1
    fi
    curl -sf "http://127.0.0.1:$port/healthz" >/dev/null && return 0
    sleep 0.2
  done
  echo "same-machine: the $name server did not answer /healthz in 120 s; its log is $work/$name.log" >&2
  exit 1
}

# measure NAME CHECKOUT DATABASE API [bench:ws options]
measure() {
  local name=$1 checkout=$2 database=$3 api=$4
  shift 4
  start_server "$name" "$checkout" "$database"
  echo "same-machine: load average before the $name run: $(cut -d' ' -f1-3 /proc/loadavg)" >&2
  (cd "$here" && node --import tsx bench/ws.ts --only clients --clients-pending "$pending" --api "$api" \
    --external-url "$server_url" --external-pid "$server_pid" --external-database-url "$(db_url "$database")" --admin-token "$token" \
    --label "$(git -C "$checkout" rev-parse --short HEAD) ($api API, $checkout)" --json "$work/$name.json" "$@" ${extra[@]+"${extra[@]}"})
  stop_server
  drop_database "$database"
}

echo "## same machine: $old_api ($old_checkout), then this checkout ($here), P=$pending"
echo
echo "### $old_api"
echo
measure old "$old_checkout" tagsched_same_old "$old_api"
echo
echo "### this checkout, compared with $old_api measured just before"
echo
measure current "$here" tagsched_same_current current --baseline-json "$work/old.json"
