#!/bin/sh
# The LLVM blobs beside this script, as clang writes them: k.c compiled for an x86_64 OpenMP
# target by clang-19 (32-byte entry rows in omp_offloading_entries) and clang-22 (56-byte
# rows in llvm_offload_entries), each section's content copied out of the object; and by
# clang-23 (OffloadBinary version 2) in the sid chroot (tests/chroots/make.sh), where it is.
# tests/test_format_declarations.py reads them through offlink's readers and through the
# construct declarations (offlink/formats/declarations.py).
set -eu
cd "$(dirname "$0")"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for pair in 19:omp_offloading_entries 22:llvm_offload_entries; do
  v=${pair%%:*} entries=${pair#*:}
  "clang-$v" -O2 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu -c k.c -o "$tmp/k.o"
  objcopy --dump-section ".llvm.offloading=clang$v.llvm.offloading.bin" \
          --dump-section "$entries=clang$v.$entries.bin" "$tmp/k.o" "$tmp/out.o"
done
sid=../../../.ci/chroots/sid
if [ -f "$sid/.offlink-ready" ]; then
  ../../../tests/chroots/run.sh "$sid" clang-23 -O2 -fopenmp -fopenmp-targets=x86_64-pc-linux-gnu \
    -c k.c -o "$tmp/k.o"
  objcopy --dump-section ".llvm.offloading=clang23.llvm.offloading.bin" "$tmp/k.o" "$tmp/out.o"
fi
