#!/usr/bin/env bash
# The GPU check (bench/gpu_check.py) in one command, from the repository's source, on a machine
# whose Python lacks some of surreal's dependencies: wheels carried in .whl/ (made here with
# `bash bench/gpu_wheels.sh`) are installed into /tmp/surreal-site first.
#
#   bash bench/gpu_check.sh [gpu_check.py options]      # e.g. --dry-run, --quick, --budget-s 470
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
SITE=""
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/surreal-site .whl/*.whl
  SITE=/tmp/surreal-site:
fi
export PYTHONPATH="${SITE}$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
exec "$PY" bench/gpu_check.py "$@"
