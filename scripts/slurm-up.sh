#!/usr/bin/env bash
# Starts a real single-host Slurm cluster (munge, slurmctld, N logical slurmd nodes) for tests and demos.
#
# Usage: eval "$(scripts/slurm-up.sh [STATE_DIR])"   # STATE_DIR defaults to $SURREAL_SLURM_DIR
#                                                    # or /tmp/surreal-slurm
# Idempotent: when the cluster of STATE_DIR is already up it only prints the export line.
# Stdout is exactly one line, `export SLURM_CONF=STATE_DIR/slurm.conf`; progress goes to stderr.
# Stop it with scripts/slurm-down.sh [STATE_DIR]. Needs root and the Debian packages
# slurmctld slurmd slurm-client munge (scripts/install-system-deps.sh installs them).
#
# Knobs (environment): SLURM_NODES (logical nodes on this host, default 2), SLURM_NODE_CPUS
# (CPUs each node advertises, default 4; config_overrides lets it exceed the real count),
# SLURM_NODE_MEM_MB (default 4096), SLURM_CTLD_PORT (node i listens on +i; default: 6817, or the
# first free run of ports above it), SLURM_UP_TIMEOUT (seconds to wait for idle nodes, default 30).
#
# Two clusters on one host: each has its own munged (socket, key and pid file in
# STATE_DIR/munge, named in slurm.conf's AuthInfo), and its own ports: an explicit
# SLURM_CTLD_PORT held by anything else is an error, never "up"; "up" is only said when the
# controller answering on the port is this STATE_DIR's.
set -euo pipefail

state=$(realpath -m "${1:-${SURREAL_SLURM_DIR:-/tmp/surreal-slurm}}")
nodes=${SLURM_NODES:-2}
cpus=${SLURM_NODE_CPUS:-4}
mem_mb=${SLURM_NODE_MEM_MB:-4096}
ctld_port=${SLURM_CTLD_PORT:-}
deadline=$(( $(date +%s) + ${SLURM_UP_TIMEOUT:-30} ))
conf="$state/slurm.conf"
host=$(hostname -s)
export SLURM_CONF="$conf"

log() { echo "slurm-up: $*" >&2; }
fail() { echo "slurm-up: error: $*" >&2; exit 1; }

for bin in munged slurmctld slurmd sinfo scontrol; do
  command -v "$bin" >/dev/null || fail "$bin not found; install the Debian packages: \
apt-get install -y --no-install-recommends slurmctld slurmd slurm-client munge"
done
[ "$(id -u)" -eq 0 ] || fail "run as root (slurmd starts jobs as their owner)"

node_names() { for i in $(seq 1 "$nodes"); do printf 'n%d ' "$i"; done; }

# port_used PORT: something accepts connections on 127.0.0.1:PORT.
port_used() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# ports_free BASE: BASE..BASE+nodes all unused.
ports_free() {
  local p
  for p in $(seq "$1" $(( $1 + nodes ))); do port_used "$p" && return 1; done
  return 0
}

# ours: the controller answering on the configured port keeps its state in this STATE_DIR.
ours() {
  [ "$(scontrol show config 2>/dev/null | awk '$1 == "StateSaveLocation" {print $3}')" = "$state/ctld" ]
}

all_idle() {
  ours || return 1
  local states
  states=$(sinfo -h -N -o '%T' 2>/dev/null) || return 1
  [ "$(grep -c . <<<"$states")" -eq "$nodes" ] || return 1
  ! grep -qvE '^(idle|mixed|allocated|completing)$' <<<"$states"
}

pid_alive() { [ -s "$1" ] && kill -0 "$(cat "$1")" 2>/dev/null; }

munge_dir="$state/munge"
munge_socket="$munge_dir/munge.socket"
munge_ok() { munge -S "$munge_socket" -n </dev/null 2>/dev/null | unmunge -S "$munge_socket" >/dev/null 2>&1; }

# This cluster's own munged: socket, key, pid, log and seed in STATE_DIR/munge.
start_munge() {
  if pid_alive "$munge_dir/munged.pid" && munge_ok; then return; fi
  install -d -m 0700 "$munge_dir"
  if [ ! -s "$munge_dir/munge.key" ]; then
    dd if=/dev/urandom of="$munge_dir/munge.key" bs=1 count=1024 status=none
    chmod 0400 "$munge_dir/munge.key"
  fi
  log "starting munged (socket $munge_socket)"
  /usr/sbin/munged --force --socket="$munge_socket" --key-file="$munge_dir/munge.key" \
    --pid-file="$munge_dir/munged.pid" --log-file="$munge_dir/munged.log" \
    --seed-file="$munge_dir/munged.seed"
  until munge_ok; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "munged did not answer; see $munge_dir/munged.log"
    sleep 0.1
  done
}

write_conf() {
  local node_lines="" i=1
  for n in $(node_names); do
    node_lines+="NodeName=$n NodeHostname=$host NodeAddr=127.0.0.1 Port=$((ctld_port + i)) "
    node_lines+="CPUs=$cpus RealMemory=$mem_mb State=UNKNOWN"$'\n'
    i=$((i + 1))
  done
  cat >"$conf" <<EOF
# Written by scripts/slurm-up.sh: a single-host test cluster. Do not use in production.
ClusterName=surreal
SlurmctldHost=$host(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
AuthInfo=socket=$munge_socket
CredType=cred/munge
MpiDefault=none
ReturnToService=2
StateSaveLocation=$state/ctld
SlurmdSpoolDir=$state/spool/%n
SlurmctldPidFile=$state/slurmctld.pid
SlurmdPidFile=$state/slurmd.%n.pid
SlurmctldLogFile=$state/log/slurmctld.log
SlurmdLogFile=$state/log/slurmd.%n.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/filetxt
JobCompLoc=$state/log/jobcomp.log
SchedulerType=sched/builtin
SchedulerParameters=batch_sched_delay=0
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU_Memory
DefMemPerCPU=256
KillWait=5
InactiveLimit=0
MinJobAge=300
MailProg=/bin/true
$node_lines
PartitionName=debug Nodes=ALL Default=YES MaxTime=INFINITE State=UP
EOF
}

if [ -f "$conf" ] && pid_alive "$state/slurmctld.pid" && all_idle; then
  log "already up ($state)"
  echo "export SLURM_CONF=$conf"
  exit 0
fi

if pid_alive "$state/slurmctld.pid" && [ -f "$conf" ]; then
  ctld_port=$(awk -F= '$1 == "SlurmctldPort" {print $2}' "$conf")  # ours runs: keep its ports
elif [ -n "$ctld_port" ]; then
  ports_free "$ctld_port" || fail "port $ctld_port..$((ctld_port + nodes)) is in use (another \
cluster?); choose other ports with SLURM_CTLD_PORT, or leave it unset to pick free ones"
else
  ctld_port=6817
  until ports_free "$ctld_port"; do
    ctld_port=$((ctld_port + nodes + 1))
    [ "$ctld_port" -lt 65000 ] || fail "no free run of $((nodes + 1)) ports above 6817"
  done
fi

if [ ! -d "$state" ]; then
  mkdir -p "$state"
  touch "$state/.created-by-slurm-up"
fi
mkdir -p "$state/ctld" "$state/log"
for n in $(node_names); do mkdir -p "$state/spool/$n"; done
start_munge
write_conf

if ! pid_alive "$state/slurmctld.pid"; then
  log "starting slurmctld on port $ctld_port"
  slurmctld -f "$conf" -c  # -c: a fresh cluster, no jobs from an earlier run
fi
for n in $(node_names); do
  if ! pid_alive "$state/slurmd.$n.pid"; then
    log "starting slurmd $n"
    slurmd -f "$conf" -N "$n"
  fi
done

until all_idle; do
  pid_alive "$state/slurmctld.pid" || fail "slurmctld exited; see $state/log/slurmctld.log"
  if [ "$(date +%s)" -ge "$deadline" ]; then
    sinfo -N >&2 || true
    fail "nodes not idle in time; see $state/log/slurmctld.log and $state/log/slurmd.*.log"
  fi
  sleep 0.1
done
log "up: $nodes node(s) ($(node_names)), $cpus CPUs and $mem_mb MB each, state in $state"
echo "export SLURM_CONF=$conf"
