#!/usr/bin/env bash
# Stops the cluster that scripts/slurm-up.sh started and leaves nothing behind.
#
# Usage: scripts/slurm-down.sh [STATE_DIR]   # same default as slurm-up.sh
# Cancels every job, waits for the job steps to end, stops slurmd and slurmctld (SIGTERM, then
# SIGKILL after a deadline), stops this cluster's own munged (STATE_DIR/munge; never another
# cluster's or the system's), and removes STATE_DIR if slurm-up.sh created it. Safe to run when
# nothing is up.
set -euo pipefail

state=$(realpath -m "${1:-${SURREAL_SLURM_DIR:-/tmp/surreal-slurm}}")
conf="$state/slurm.conf"
export SLURM_CONF="$conf"
timeout_s=${SLURM_DOWN_TIMEOUT:-20}

log() { echo "slurm-down: $*" >&2; }

# wait_gone PID...: polls until the processes exit; returns 1 at the deadline.
wait_gone() {
  local end=$(( $(date +%s) + timeout_s ))
  for pid in "$@"; do
    while kill -0 "$pid" 2>/dev/null; do
      [ "$(date +%s)" -lt "$end" ] || return 1
      sleep 0.1
    done
  done
}

stop_pids() {
  [ $# -gt 0 ] || return 0
  kill -TERM "$@" 2>/dev/null || true
  wait_gone "$@" || { log "SIGKILL $*"; kill -KILL "$@" 2>/dev/null || true; wait_gone "$@" || true; }
}

if [ ! -d "$state" ]; then
  log "nothing at $state"
  exit 0
fi

ctld_pid=""
[ -s "$state/slurmctld.pid" ] && ctld_pid=$(cat "$state/slurmctld.pid")
if [ -f "$conf" ] && [ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null; then
  scancel --full --quiet --user=root 2>/dev/null || true
  scancel --full --quiet 2>/dev/null || true
  end=$(( $(date +%s) + timeout_s ))
  while [ -n "$(squeue -h -o %i 2>/dev/null)" ] && [ "$(date +%s)" -lt "$end" ]; do
    sleep 0.1
  done
fi

# The jobs are gone (their slurmstepd processes exit with them); now the daemons.
slurmd_pids=()
for f in "$state"/slurmd.*.pid; do
  [ -s "$f" ] && kill -0 "$(cat "$f")" 2>/dev/null && slurmd_pids+=("$(cat "$f")")
done
stop_pids "${slurmd_pids[@]}"
[ -n "$ctld_pid" ] && kill -0 "$ctld_pid" 2>/dev/null && stop_pids "$ctld_pid"

if [ -s "$state/munge/munged.pid" ] && kill -0 "$(cat "$state/munge/munged.pid")" 2>/dev/null; then
  log "stopping munged ($state/munge)"
  stop_pids "$(cat "$state/munge/munged.pid")"
fi

if [ -f "$state/.created-by-slurm-up" ]; then
  rm -rf "$state"
else
  rm -rf "$state/ctld" "$state/spool" "$state/log" "$state"/*.pid "$conf" "$state/munge"
fi
log "down ($state)"
