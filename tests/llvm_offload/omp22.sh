#!/usr/bin/env bash
# omp.h (and ompx.h, omp-tools.h) of LLVM 22 for clang-22's OpenMP compiles, unpacked from
# Debian's libomp-22-dev into a private folder: the package itself cannot be installed beside
# libomp-19-dev (they conflict; its libomp.so.5 is libomp5-19's anyway).
#
#     tests/llvm_offload/omp22.sh [DEST]     (default .ci/libomp-22-dev; ignored by git)
#
# DEST/include holds the headers afterwards (tests/conftest.py: OMP22_INCLUDE). Idempotent.
set -euo pipefail
dest=${1:-.ci/libomp-22-dev}
[ -f "$dest/include/omp.h" ] && exit 0
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# apt-get download writes into the current folder (as _apt where it can read it: chmod).
chmod 777 "$tmp"
(cd "$tmp" && apt-get download -qq libomp-22-dev)
dpkg-deb -x "$tmp"/libomp-22-dev_*.deb "$tmp/root"
mkdir -p "$tmp/out"
mv "$tmp/root/usr/lib/llvm-22/lib/clang/22/include" "$tmp/out/include"
rm -rf "$dest"
mv "$tmp/out" "$dest"
