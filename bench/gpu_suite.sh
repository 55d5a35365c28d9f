#!/usr/bin/env bash
# Issue 47's GPU suite (bench/gpu_suite.py) in one command on the lent GPU machine, from the
# repository's source: the GL loaders carried in .gl/ unpacked into / (EGL for robosuite's
# camera, MUJOCO_GL=egl), the wheels carried in .whl/ installed into /tmp/surreal-site (both made
# here by `bash bench/gpu_wheels.sh`). Writes gpu_suite.md and gpu_suite.json to $OUT, else
# bench/out; ~8 minutes with the default --budget-s 470.
#
#   bash bench/gpu_suite.sh [gpu_suite.py options]      # e.g. --budget-s 300, --dry-run
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if compgen -G ".gl/*.deb" >/dev/null; then
  for f in .gl/*.deb; do dpkg -x "$f" /; done
  ldconfig
fi
NVIDIA_EGL=/usr/local/nvidia/share/glvnd/egl_vendor.d/10_nvidia.json
if [[ -f $NVIDIA_EGL && -z ${__EGL_VENDOR_LIBRARY_FILENAMES:-} ]]; then
  export __EGL_VENDOR_LIBRARY_FILENAMES=$NVIDIA_EGL
fi
export MUJOCO_GL=egl PYTHONUNBUFFERED=1
if compgen -G ".whl/*.whl" >/dev/null; then
  "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade \
    --target /tmp/surreal-site .whl/*.whl
  export PYTHONPATH="/tmp/surreal-site:$PWD${PYTHONPATH:+:$PYTHONPATH}"
else
  export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
fi
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
exec "$PY" bench/gpu_suite.py "$@"
