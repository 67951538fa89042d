#!/usr/bin/env bash
# Build the chroots that hold the later toolchains (../../docs/gcc.md, docs/llvm.md):
#   DIR/trixie  Debian 13: gcc-13 (nvptx) and gcc-14 (nvptx, amdgcn) with their offload compilers
#   DIR/sid     Debian unstable: gcc-15, gcc-16 (with their offload compilers) and clang-23
# Each gets its system's Python (3.13, 3.14) with offlink's dependencies installed from wheels
# downloaded on the host (pip inside the chroot fails on TLS against this network's proxy).
# Usage: tests/chroots/make.sh DIR [trixie|sid ...]   (as root; idempotent: a finished chroot
# has DIR/NAME/.offlink-ready naming what it holds; a step whose list changed is done again)
set -euo pipefail
dir=$(realpath -m "$1"); shift
suites=("$@"); [ ${#suites[@]} -gt 0 ] || suites=(trixie sid)
mirror=http://deb.debian.org/debian
here=$(cd "$(dirname "$0")" && pwd)
command -v debootstrap >/dev/null || {
  apt-get update -qq; DEBIAN_FRONTEND=noninteractive apt-get install -y -qq debootstrap; }
mkdir -p "$dir"

# The wheels for a chroot's Python (trixie 3.13, sid 3.14), downloaded on the host once.
wheels_for() {
  local version=$1 wheels=$dir/wheels-cp${1/./}
  if [ ! -f "$wheels/.done" ]; then
    # pip from a venv of its own: the host's python3 need not have pip (python3-venv is enough)
    [ -x "$dir/pip-venv/bin/pip" ] || python3 -m venv "$dir/pip-venv" >&2
    "$dir/pip-venv/bin/python" -m pip download -q --python-version "$version" --only-binary=:all: \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 \
      --platform manylinux2014_x86_64 --platform any -d "$wheels" \
      -r "$here/requirements.txt"
    cp "$here/requirements.txt" "$wheels/requirements.txt"
    touch "$wheels/.done"
  fi
  echo "$wheels"
}

# (gcc-13-offload-amdgcn is left out: its amdgcn-tools conflicts with gcc-14's amdgcn-tools-19)
packages_trixie="gcc-13 g++-13 gfortran-13 gcc-13-offload-nvptx
  gcc-14 g++-14 gfortran-14 gcc-14-offload-nvptx gcc-14-offload-amdgcn nvptx-tools
  binutils make python3 python3-dev python3-venv python3-pip"
packages_sid="gcc-15 g++-15 gfortran-15 gcc-15-offload-nvptx gcc-15-offload-amdgcn
  gcc-16 g++-16 gfortran-16 gcc-16-offload-nvptx gcc-16-offload-amdgcn nvptx-tools
  clang-23 llvm-23 clang-tools-23 liboffload-23 liboffload-23-dev libomp-23-dev lld-23
  binutils make python3 python3-dev python3-venv python3-pip"

build() {
  local suite=$1 root=$dir/$1
  local pk=packages_$suite
  # What a finished chroot has: its package list, and the wheels' requirements (each step is
  # done again when its list changed; .offlink-ready holds both)
  local reqs; reqs=$(grep -v '^#' "$here/requirements.txt" | tr '\n' ' ')
  local want; want="$(echo ${!pk}) | $reqs"
  [ "$(cat "$root/.offlink-ready" 2>/dev/null)" = "$want" ] && return 0
  if [ ! -x "$root/usr/bin/apt-get" ] || [ ! -f "$root/.offlink-bootstrapped" ]; then
    rm -rf "$root"
    debootstrap --variant=minbase "$suite" "$root" "$mirror" >"$dir/$suite.log" 2>&1
    touch "$root/.offlink-bootstrapped"
  fi
  [ "$(cat "$root/.offlink-packages" 2>/dev/null)" = "$(echo ${!pk})" ] || {
  unshare --mount --propagation private bash -c '
    set -e
    mount -t proc proc "$1/proc"
    cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
    chroot "$1" apt-get -o Acquire::Check-Valid-Until=false update -qq
    chroot "$1" env DEBIAN_FRONTEND=noninteractive apt-get -o Acquire::Check-Valid-Until=false \
      install -y -qq --no-install-recommends $2
  ' _ "$root" "${!pk}" >>"$dir/$suite.log" 2>&1
  echo ${!pk} > "$root/.offlink-packages"; }
  [ "$(cat "$root/.offlink-venv" 2>/dev/null)" = "$reqs" ] || {
  local version; version=$(chroot "$root" python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  local wheels; wheels=$(wheels_for "$version")
  unshare --mount --propagation private bash -c '
    set -e
    mount -t proc proc "$1/proc"
    cp /etc/resolv.conf "$1/etc/resolv.conf" 2>/dev/null || true
    rm -rf "$1/opt/offlink-wheels" "$1/opt/offlink-venv"
    mkdir -p "$1/opt/offlink-wheels"
    cp "$3"/*.whl "$3"/requirements.txt "$1/opt/offlink-wheels/"
    chroot "$1" python3 -m venv /opt/offlink-venv
    chroot "$1" /opt/offlink-venv/bin/pip install -q --no-index --find-links /opt/offlink-wheels \
      -r /opt/offlink-wheels/requirements.txt
  ' _ "$root" "" "$wheels" >>"$dir/$suite.log" 2>&1
  echo "$reqs" > "$root/.offlink-venv"; }
  echo "$want" > "$root/.offlink-ready"
}
pids=()
for s in "${suites[@]}"; do build "$s" & pids+=($!); done
rc=0; for p in "${pids[@]}"; do wait "$p" || rc=1; done
[ $rc = 0 ] || { echo "tests/chroots/make.sh: failed, see $dir/*.log" >&2; exit 1; }
