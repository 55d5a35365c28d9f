#!/usr/bin/env bash
# Download, here, the py3.12 manylinux wheels that a GPU machine with torch but without surreal's
# other dependencies needs (bench/gpu_check.sh installs them from .whl/). Run from the repository
# root; add `/.whl/` to .git/info/exclude so the folder stays untracked, and carry it.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux1_x86_64 manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64; do
  PLATFORMS+=(--platform "$p")
done
PACKAGES=(pyzmq gymnasium mujoco glfw PyOpenGL Farama-Notifications tensorboardX)
exec "$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d .whl "${PACKAGES[@]}"
