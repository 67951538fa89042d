#!/usr/bin/env bash
# Build the chroots that hold the later toolchains (../../docs/gcc.md, docs/llvm.md):
#   DIR/trixie  Debian 13: gcc-14 with its nvptx and amdgcn offload compilers
#   DIR/sid     Debian unstable: gcc-15, gcc-16 (with their offload compilers) and clang-23
# Each gets its system's Python 3.13 with offlink's dependencies installed from wheels
# downloaded on the host (pip inside the chroot fails on TLS against this network's proxy).
# Usage: tests/chroots/make.sh DIR [trixie|sid ...]   (as root; idempotent: a finished chroot
# has DIR/NAME/.offlink-ready and is left as it is)
set -euo pipefail
dir=$(realpath -m "$1"); shift
suites=("$@"); [ ${#suites[@]} -gt 0 ] || suites=(trixie sid)
mirror=http://deb.debian.org/debian
here=$(cd "$(dirname "$0")" && pwd)
command -v debootstrap >/dev/null || {
  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
mkdir -p "$dir"

wheels=$dir/wheels-cp313
if [ ! -f "$wheels/.done" ]; then
  python3 -m pip download -q --python-version 3.13 --only-binary=:all: \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
    --platform manylinux2014_x86_64 --platform any -d "$wheels" \
    -r "$here/requirements.txt"
  touch "$wheels/.done"
fi

packages_trixie="gcc-14 g++-14 gfortran-14 gcc-14-offload-nvptx gcc-14-offload-amdgcn nvptx-tools
  binutils make python3 python3-dev python3-venv python3-pip"
packages_sid="gcc-15 g++-15 gfortran-15 gcc-15-offload-nvptx gcc-15-offload-amdgcn
  gcc-16 g++-16 gfortran-16 gcc-16-offload-nvptx gcc-16-offload-amdgcn nvptx-tools
  clang-23 llvm-23 clang-tools-23 liboffload-23 liboffload-23-dev libomp-23-dev lld-23
  binutils make python3 python3-dev python3-venv python3-pip"

build() {
  local suite=$1 root=$dir/$1
  [ -f "$root/.offlink-ready" ] && return 0
  if [ ! -x "$root/usr/bin/apt-get" ] || [ ! -f "$root/.offlink-bootstrapped" ]; then
    rm -rf "$root"
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$dir/$suite.log" 2>&1
    touch "$root/.offlink-bootstrapped"
  fi
  local pk=packages_$suite
  unshare --mount --propagation private bash -c '
    set -e
    mount -t proc proc "$1/proc"
    cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
    chroot "$1" apt-get -o Acquire::Check-Valid-Until=false update -qq
    chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false \
      install -y -qq --no-install-recommends $2
    mkdir -p "$1/opt/offlink-wheels"
    cp "$3"/*.whl "$1/opt/offlink-wheels/"
    chroot "$1" python3 -m venv /opt/offlink-venv
    chroot "$1" /opt/offlink-venv/bin/pip install -q --no-index --find-links /opt/offlink-wheels \
      -r /opt/offlink-wheels/requirements.txt
  ' _ "$root" "${!pk}" "$wheels" >>"$dir/$suite.log" 2>&1
  touch "$root/.offlink-ready"
}
cp "$here/requirements.txt" "$wheels/requirements.txt"
pids=()
for s in "${suites[@]}"; do build "$s" & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc = 0 ] || { echo "tests/chroots/make.sh: failed, see $dir/*.log" >&2; exit 1; }
