#!/usr/bin/env bash
# Download, here, what a GPU machine with torch (numpy, pyarrow, scipy, numba, opencv-python-
# headless, pillow, absl-py, etils, ...) but without surreal's other dependencies needs for
# bench/gpu_check.sh and bench/gpu_suite.sh: py3.12 manylinux wheels into .whl/ (the versions
# this repository's .venv runs), robosuite's cut to what robosuite:Lift with the Panda arm loads
# (157 MB -> ~14 MB: other robots' meshes, unused textures and bullet_data dropped), and the GL
# loader Debian packages for EGL into .gl/ (/work/.library/device/README.md). Both folders are
# added to .git/info/exclude (they stay untracked); carry both. Together ~26 MB (2026-12-04),
# beside a ~4 MB repository, well under the 64 MiB a call may carry.
#
#   bash bench/gpu_wheels.sh      # from anywhere in the checkout; replaces .whl/*.whl
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
for folder in /.whl/ /.gl/; do
  grep -qxF "$folder" .git/info/exclude 2>/dev/null || echo "$folder" >>.git/info/exclude
done
PLATFORMS=()
for p in manylinux_2_28_x86_64 manylinux_2_27_x86_64 manylinux_2_17_x86_64 manylinux2014_x86_64 \
  manylinux1_x86_64 manylinux_2_24_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64; do
  PLATFORMS+=(--platform "$p")
done
# One version of each (two stop the install); robosuite's other needs are on the machine or not
# imported for Lift (mink, qpsolvers, pynput; opencv-python as the machine's headless build).
PACKAGES=(pyzmq==27.3.0 gymnasium==1.4.0 mujoco==3.3.7 glfw==2.11.0 PyOpenGL==3.1.10
  Farama-Notifications==0.0.6 tensorboardX==2.6.5 robosuite==1.5.2 termcolor==3.3.0)
rm -f .whl/*.whl
"$PY" -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 \
  --implementation cp "${PLATFORMS[@]}" -d .whl "${PACKAGES[@]}"
"$PY" - .whl/robosuite-*.whl <<'EOF'
"""Keep robosuite's code and the assets robosuite:Lift with the Panda arm loads; the wheel's
RECORD lists what is left."""
import re, sys, zipfile
from pathlib import Path

ASSETS = "robosuite/models/assets/"
USED = re.compile(r"/(panda|panda_gripper|rethink_mount)/|/textures/(ceramic|light-gray-floor-"
                  r"tile|light-gray-plaster|steel-brushed|red-wood)\.png$")
wheel = Path(sys.argv[1])
cut = wheel.with_suffix(".cut")
with zipfile.ZipFile(wheel) as src, zipfile.ZipFile(cut, "w", zipfile.ZIP_DEFLATED) as dst:
    keep = [i for i in src.infolist() if not i.filename.startswith(ASSETS) or (
        "/bullet_data/" not in i.filename
        and (i.filename.endswith((".xml", ".json")) or USED.search(i.filename)))]
    names = {i.filename for i in keep}
    for info in keep:
        data = src.read(info)
        if info.filename.endswith(".dist-info/RECORD"):
            lines = data.decode().splitlines()
            data = "".join(f"{x}\n" for x in lines if x.split(",")[0] in names).encode()
        dst.writestr(info, data)
cut.replace(wheel)
EOF
if ! compgen -G ".gl/*.deb" >/dev/null; then
  mkdir -p .gl /tmp/amd64/partial
  apt=(-oAPT::Architecture=amd64 -oAPT::Architectures=amd64 -oDir::State::Lists=/tmp/amd64)
  apt-get "${apt[@]}" update -qq
  (cd .gl && apt-get "${apt[@]}" download -qq libvulkan1 libegl1 libglvnd0 libopengl0 libgl1 \
    libglx0 libgles2)
fi
du -sh .whl .gl
