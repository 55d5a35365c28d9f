#!/usr/bin/env bash
# Installs the Debian packages the backend tests drive for real: tmux, a docker engine with
# compose v1, debootstrap (base images without a registry), and a Slurm cluster with munge.
# Idempotent: does nothing when every package is already there.
set -euo pipefail
packages=(tmux docker.io docker-compose debootstrap busybox-static slurmctld slurmd slurm-client munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "system packages: all present"
  exit 0
fi
if [ "$(id -u)" -ne 0 ]; then
  echo "missing Debian packages: ${missing[*]}; run as root: apt-get install -y ${missing[*]}" >&2
  exit 1
fi
echo "installing: ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
