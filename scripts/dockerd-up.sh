#!/usr/bin/env bash
# Starts a private docker engine (no bridge, no iptables) on its own unix socket and prints its env.
#
# Usage:  eval "$(scripts/dockerd-up.sh)"      # then: docker info; scripts/dockerd-down.sh
#
# Prints `export DOCKER_HOST=unix://RUN/docker.sock` and `export SYMPHONY_DOCKERD_DIR=RUN`, where
# RUN is a fresh temporary folder holding the socket, pidfile, exec-root and dockerd.log.
# Images live in a persistent data-root so locally made base images are built once:
#   SYMPHONY_DOCKERD_DATA  (default ${XDG_CACHE_HOME:-$HOME/.cache}/symphony-dockerd)
# If another engine already uses that data-root, a throwaway one under RUN is used instead.
# The engine has no bridge network: run containers with `--network host` or `--network none`.
# Storage driver: overlay2, falling back to vfs where overlay mounts are refused
# (force one with SYMPHONY_DOCKERD_DRIVER=vfs). Deadline for readiness: SYMPHONY_DOCKERD_TIMEOUT (60 s).
set -euo pipefail

command -v dockerd >/dev/null || {
  echo "dockerd not found; install the engine: apt-get install -y docker.io (or scripts/install-system-deps.sh)" >&2
  exit 1
}
[ "$(id -u)" -eq 0 ] || { echo "dockerd needs root; run this script as root" >&2; exit 1; }

run=$(mktemp -d "${TMPDIR:-/tmp}/symphd.XXXXXX")
data_base=${SYMPHONY_DOCKERD_DATA:-${XDG_CACHE_HOME:-$HOME/.cache}/symphony-dockerd}
timeout=${SYMPHONY_DOCKERD_TIMEOUT:-60}
sock="$run/docker.sock"
mkdir -p "$data_base"

# Hold a lock on the shared data-root for the engine's lifetime: dockerd inherits fd 9.
exec 9>"$data_base/.lock"
if ! flock -n 9; then
  echo "data-root $data_base is in use by another engine; using a throwaway one in $run" >&2
  exec 9>&-
  data_base="$run/data"
fi

start() {  # start DRIVER: launch dockerd and wait until it answers; returns 1 if it died
  local driver=$1
  mkdir -p "$data_base/$driver"
  dockerd \
    --host "unix://$sock" \
    --data-root "$data_base/$driver" \
    --exec-root "$run/exec" \
    --pidfile "$run/dockerd.pid" \
    --storage-driver "$driver" \
    --iptables=false --ip6tables=false --ip-masq=false --bridge=none \
    --userland-proxy=false \
    >>"$run/dockerd.log" 2>&1 </dev/null &
  local pid=$!
  local deadline=$(( $(date +%s) + timeout ))
  while [ "$(date +%s)" -lt "$deadline" ]; do
    if docker -H "unix://$sock" info >/dev/null 2>&1; then
      echo "$pid" >"$run/dockerd.pid.launcher"
      return 0
    fi
    kill -0 "$pid" 2>/dev/null || return 1
    sleep 0.2  # polling with a deadline, not synchronization
  done
  echo "dockerd did not answer within ${timeout}s; see $run/dockerd.log" >&2
  kill "$pid" 2>/dev/null || true
  exit 1
}

driver=${SYMPHONY_DOCKERD_DRIVER:-overlay2}
if ! start "$driver"; then
  if [ "$driver" = overlay2 ]; then
    echo "overlay2 refused (see $run/dockerd.log); falling back to vfs" >&2
    start vfs || { echo "dockerd failed to start; see $run/dockerd.log" >&2; exit 1; }
  else
    echo "dockerd failed to start; see $run/dockerd.log" >&2
    exit 1
  fi
fi
exec 9>&- 2>/dev/null || true
echo "export DOCKER_HOST=unix://$sock"
echo "export SYMPHONY_DOCKERD_DIR=$run"
