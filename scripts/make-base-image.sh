#!/usr/bin/env bash
# Makes local base images without a registry (this machine cannot pull), by `docker import`.
#
# Usage:  scripts/make-base-image.sh busybox [TAG]   # static busybox: sh + coreutils, ~2 MB, <1 s
#         scripts/make-base-image.sh python  [TAG]   # this machine's Python + chosen packages, ~10 s
#         scripts/make-base-image.sh debian  [TAG]   # debootstrap minbase + python3, then apt
#                                                    # installs $DEB_PACKAGES (numpy, zmq, yaml,
#                                                    # click, psutil); needs the Debian mirror
# Default tags: symphony-base/busybox:latest, symphony-base/python:3.11, symphony-base/debian:bookworm.
#
# `python` copies the interpreter that runs $PYTHON (default: the project's .venv) with its
# standard library (tests, tkinter, idle dropped), the site-packages named in $PY_PACKAGES
# (default: numpy zmq yaml click psutil pyarrow), the shared libraries they link (found with ldd)
# and busybox for /bin/sh. Same Python and package versions as the venv, so the project's code
# runs unchanged in the container; copy the project in with `symphony build`.
# Needs: docker reachable through DOCKER_HOST (see scripts/dockerd-up.sh), busybox-static.
set -euo pipefail
kind=${1:-}
here=$(cd "$(dirname "$0")/.." && pwd)
busybox=$(command -v busybox || true)

need_busybox() {
  [ -n "$busybox" ] && file -L "$busybox" 2>/dev/null | grep -q "statically linked" || {
    echo "a static busybox is needed; install it: apt-get install -y busybox-static" >&2; exit 1; }
}

busybox_root() {  # busybox_root DIR: a minimal root with busybox applets in /bin
  local root=$1
  mkdir -p "$root"/{bin,etc,tmp,root,proc,sys,dev,usr/bin}
  chmod 1777 "$root/tmp"
  cp "$busybox" "$root/bin/busybox"
  for applet in $("$busybox" --list); do
    [ -e "$root/bin/$applet" ] || ln -s busybox "$root/bin/$applet"
  done
  printf 'root:x:0:0:root:/root:/bin/sh\nnobody:x:65534:65534:nobody:/:/bin/sh\n' >"$root/etc/passwd"
  printf 'root:x:0:\nnogroup:x:65534:\n' >"$root/etc/group"
  printf 'hosts: files dns\n' >"$root/etc/nsswitch.conf"
  printf '127.0.0.1 localhost\n' >"$root/etc/hosts"
}

copy_libs() {  # copy_libs ROOT FILE...: copy the shared libraries FILEs link against into ROOT
  local root=$1; shift
  for f in "$@"; do ldd "$f" 2>/dev/null || true; done \
    | awk '/=> \//{print $3} /^\t\/lib/{print $1}' | sort -u | while read -r lib; do
      case "$lib" in "$root"*) continue ;; esac
      mkdir -p "$root$(dirname "$lib")"
      [ -e "$root$lib" ] || cp -L "$lib" "$root$lib"
    done
}

make_python() {
  local root=$1
  local py=${PYTHON:-$here/.venv/bin/python}
  local pkgs=${PY_PACKAGES:-numpy zmq yaml click psutil pyarrow}
  busybox_root "$root"
  # Interpreter prefix, stdlib, and the folders of each requested package (with its *.libs).
  "$py" - "$root" $pkgs <<'PY'
import importlib.metadata, importlib.util, os, shutil, sys, sysconfig
root, names = sys.argv[1], sys.argv[2:]
prefix = sys.base_prefix
ver = f"python{sys.version_info.major}.{sys.version_info.minor}"
dst = os.path.join(root, "usr/local")
os.makedirs(os.path.join(dst, "bin"), exist_ok=True)
shutil.copy2(os.path.realpath(sys.executable), os.path.join(dst, "bin", ver))
for link in ("python3", "python"):
    os.symlink(ver, os.path.join(dst, "bin", link))
libdir = sysconfig.get_config_var("LIBDIR") or os.path.join(prefix, "lib")
os.makedirs(os.path.join(root, "usr/lib"), exist_ok=True)
for name in os.listdir(libdir):
    if name.startswith("libpython") and ".so" in name:
        shutil.copy2(os.path.join(libdir, name), os.path.join(root, "usr/lib", name))
skip = {"test", "tests", "idlelib", "tkinter", "turtledemo", "ensurepip", "site-packages",
        "lib2to3", "__phello__"}
stdlib = sysconfig.get_paths(vars={"base": prefix, "platbase": prefix})["stdlib"]
shutil.copytree(stdlib, os.path.join(dst, "lib", ver), symlinks=True,
                ignore=lambda d, names: [n for n in names if (d == stdlib and n in skip) or n.startswith("config-")])
site = os.path.join(dst, "lib", ver, "site-packages")
os.makedirs(site, exist_ok=True)
dists = importlib.metadata.packages_distributions()
for name in names:  # copy every file of the distribution that provides `name` (incl. *.libs)
    if importlib.util.find_spec(name) is None or name not in dists:
        sys.exit(f"package {name!r} is not installed in {sys.executable}; install it or drop it from PY_PACKAGES")
    for dist_name in dists[name]:
        dist = importlib.metadata.distribution(dist_name)
        for f in dist.files or []:
            src = str(dist.locate_file(f))
            rel = os.path.normpath(str(f))
            if rel.startswith("..") or not os.path.isfile(src):
                continue  # console scripts outside site-packages
            os.makedirs(os.path.dirname(os.path.join(site, rel)), exist_ok=True)
            shutil.copy2(src, os.path.join(site, rel))
PY
  mapfile -t sos < <(find "$root/usr/local" "$root/usr/lib" -name '*.so*' -type f)
  copy_libs "$root" "$root/usr/local/bin/"python3.* "${sos[@]}"
}

make_debian() {
  local root=$1
  local pkgs=${DEB_PACKAGES:-python3-numpy python3-zmq python3-yaml python3-click python3-psutil}
  command -v debootstrap >/dev/null || { echo "install debootstrap: apt-get install -y debootstrap" >&2; exit 1; }
  debootstrap --variant=minbase --include=python3 bookworm "$root" \
    "${DEBIAN_MIRROR:-http://deb.debian.org/debian}" >&2 \
    || { tail -30 "$root/debootstrap/debootstrap.log" >&2; exit 1; }
  # debootstrap's --include resolves dependencies poorly (python3-zmq fails); apt in the root does not.
  if [ -n "$pkgs" ]; then
    chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive apt-get update -qq >&2
    # shellcheck disable=SC2086
    chroot "$root" /usr/bin/env DEBIAN_FRONTEND=noninteractive \
      apt-get install -y -qq --no-install-recommends $pkgs >&2
  fi
  rm -rf "$root"/var/cache/apt/archives/*.deb "$root"/var/lib/apt/lists/*
}

work=$(mktemp -d "${TMPDIR:-/tmp}/symph-base.XXXXXX")
trap 'rm -rf "$work"' EXIT
case "$kind" in
  busybox) need_busybox; busybox_root "$work/root"; tag=${2:-symphony-base/busybox:latest}
           changes=(--change 'CMD ["/bin/sh"]') ;;
  python)  need_busybox; make_python "$work/root"; tag=${2:-symphony-base/python:3.11}
           changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin' --change 'CMD ["python3"]') ;;
  debian)  make_debian "$work/root"; tag=${2:-symphony-base/debian:bookworm}
           changes=(--change 'ENV PATH=/usr/local/bin:/usr/bin:/bin:/usr/sbin:/sbin' --change 'CMD ["python3"]') ;;
  *) echo "usage: $0 busybox|python|debian [TAG]" >&2; exit 2 ;;
esac
tar -C "$work/root" --numeric-owner -c . | docker import "${changes[@]}" - "$tag" >/dev/null
echo "$tag"
