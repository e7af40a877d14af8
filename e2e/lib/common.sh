# Shared paths and helpers for the e2e scripts. Sourced, never executed.
# shellcheck shell=bash

E2E_DIR=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
REPO_DIR=$(cd "$E2E_DIR/.." && pwd)
# GP_RUN_DIR lets several clusters run side by side (ports are picked free at start).
RUN_DIR="${GP_RUN_DIR:-$E2E_DIR/.run}"
# Build caches live in the usual per-user place, outside the checkout, so a fresh clone on the
# same machine (CI) reuses them. Go's own module and build caches stay at their defaults.
CACHE_DIR="${GANGPLANK_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/gangplank}"
# GP_K8S_VERSION runs another Kubernetes release than the one pinned (PINNED_K8S_VERSION):
# e2e/lib/build.sh then builds its control plane from a module generated for it.
# shellcheck source=../versions.env
source "$E2E_DIR/versions.env"
PINNED_K8S_VERSION=$K8S_VERSION
K8S_VERSION=${GP_K8S_VERSION:-$K8S_VERSION}

export GOTOOLCHAIN=local
export CGO_ENABLED=0

log() { printf '%s [e2e] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "error: $*"; exit 1; }

[[ $K8S_VERSION =~ $K8S_VERSION_PATTERN ]] ||
  die "GP_K8S_VERSION must be a Kubernetes release like 1.37.2 or 1.38.0-beta.0, not '$K8S_VERSION'"

# wait_for SECONDS DESCRIPTION COMMAND...: polls COMMAND every 0.2 s until it succeeds.
wait_for() {
  local timeout=$1 what=$2; shift 2
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

# wait_while_running NAME SECONDS DESCRIPTION COMMAND...: wait_for, but gives up as soon as
# component NAME has exited (status 2; 1 on timeout).
wait_while_running() {
  local name=$1 timeout=$2 what=$3; shift 3
  local deadline=$((SECONDS + timeout))
  until "$@" >/dev/null 2>&1; do
    if ! running "$name"; then
      log "$name exited before $what"
      return 2
    fi
    if ((SECONDS >= deadline)); then
      log "timed out after ${timeout}s waiting for $what"
      return 1
    fi
    sleep 0.2
  done
}

# free_port: a TCP port on 127.0.0.1 that nothing uses right now, below the kernel's ephemeral
# range, and not handed out before in this run (recorded in $RUN_DIR/ports). Why below: a port
# from the ephemeral range can be taken by any outgoing connection of the components already
# running before the one meant to listen on it starts (Prometheus, started last, once failed
# to bind that way).
free_port() {
  python3 - "$RUN_DIR/ports" <<'PY'
import os, random, socket, sys
record = sys.argv[1]
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
taken = set()
if os.path.exists(record):
    taken = {int(line) for line in open(record) if line.strip()}
candidates = range(10000, low) if low > 11000 else range(low, 65536)
for _ in range(2000):
    port = random.choice(candidates)
    if port in taken:
        continue
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    with open(record, "a") as f:
        f.write(f"{port}\n")
    print(port)
    break
else:
    sys.exit("e2e: no free TCP port on 127.0.0.1")
PY
}

# start NAME COMMAND...: runs COMMAND in its own session, logs to logs/NAME.log, records its PID
# and its command line (record).
start() {
  local name=$1
  record "$@"
  shift
  setsid "$@" >"$RUN_DIR/logs/$name.log" 2>&1 < /dev/null &
  echo $! >"$RUN_DIR/pids/$name.pid"
  echo "$name" >"$RUN_DIR/last-started"
}

# last_words: whether the component started last still runs, and the end of its log; what a
# failed e2e/up prints, as CI keeps no logs.
last_words() {
  local name
  name=$(cat "$RUN_DIR/last-started" 2>/dev/null) || return 0
  if running "$name"; then log "$name, started last, still runs; its log ends:"
  else log "$name, started last, has exited; its log ends:"; fi
  tail -n 25 "$RUN_DIR/logs/$name.log" >&2 || true
}

# record NAME COMMAND...: records COMMAND as component NAME's command line (cmd/NAME, one
# argument a line), for e2e/component to start it later.
record() {
  local name=$1; shift
  mkdir -p "$RUN_DIR/cmd"
  printf '%s\n' "$@" >"$RUN_DIR/cmd/$name"
}

# running NAME: the process recorded for NAME is alive.
running() {
  local pid
  pid=$(cat "$RUN_DIR/pids/$1.pid" 2>/dev/null) && kill -0 "$pid" 2>/dev/null
}

# stop NAME: SIGTERM the recorded process, then SIGKILL after 10 s; forgets the PID.
stop() {
  local name=$1 pid
  pid=$(cat "$RUN_DIR/pids/$name.pid" 2>/dev/null) || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null || true
    local deadline=$((SECONDS + 10))
    while kill -0 "$pid" 2>/dev/null && ((SECONDS < deadline)); do sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -f "$RUN_DIR/pids/$name.pid"
}

kubectl() { "$RUN_DIR/bin/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" "$@"; }
