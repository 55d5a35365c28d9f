#!/usr/bin/env bash
# Stops an engine started by scripts/dockerd-up.sh and removes its run folder.
#
# Usage:  scripts/dockerd-down.sh [RUN_DIR]     (default: $SYMPHONY_DOCKERD_DIR)
# Sends SIGTERM (dockerd stops its containers), waits up to 30 s, then SIGKILL.
set -euo pipefail
run=${1:-${SYMPHONY_DOCKERD_DIR:-}}
[ -n "$run" ] && [ -d "$run" ] || { echo "no engine folder given; pass the SYMPHONY_DOCKERD_DIR that dockerd-up.sh printed" >&2; exit 1; }
pid=""
for f in "$run/dockerd.pid" "$run/dockerd.pid.launcher"; do
  [ -s "$f" ] && pid=$(cat "$f") && break
done
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
  kill -TERM "$pid"
  deadline=$(( $(date +%s) + 30 ))
  while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do
    sleep 0.2  # polling with a deadline
  done
  kill -0 "$pid" 2>/dev/null && { echo "dockerd $pid did not stop in 30 s; killing it" >&2; kill -KILL "$pid"; }
fi
# Unmount anything the engine left under its run folder before removing it.
{ grep -o " $run[^ ]*" /proc/mounts 2>/dev/null || true; } | sort -r | while read -r m; do umount -l "$m" 2>/dev/null || true; done
rm -rf "$run"
echo "stopped engine in $run"
