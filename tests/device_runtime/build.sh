#!/usr/bin/env bash
# LLVM 22.1.8's OpenMP device runtime (libompdevice.a), built with the installed clang-22 for
# nvptx64-nvidia-cuda and amdgcn-amd-amdhsa: no Debian suite packages it (shared/FACTS.md), and
# clang-22's own GPU link, the reference offlink's is checked against, needs it.
#
#     tests/device_runtime/build.sh SRC DEST     (.ci/run: .ci/llvm-22-devrt-src .ci/llvm-22-devrt)
#
# SRC is what `tests/llvm_offload/fetch.sh SRC 22 device-runtime` unpacks (openmp/device,
# offload/include, libc/shared). DEST is laid out as an LLVM install lays the runtime out
# (openmp/device/CMakeLists.txt, LLVM_ENABLE_PER_TARGET_RUNTIME_DIR):
#     DEST/lib/<triple>/libomptarget-<nvptx|amdgpu>.bc   the runtime linked into one bitcode file
#     DEST/lib/<triple>/libompdevice.a                  that file as the archive's one member
# The compile and link lines are CMake's for that folder. Idempotent: a complete DEST (its
# .complete stamp) is left alone. Deterministic: the same clang-22 gives the same bytes, from any
# SRC folder.
set -euo pipefail
src=$1
dest=$2
[ -f "$dest/.complete" ] && exit 0
for f in openmp/device/src/Kernel.cpp offload/include/Shared/Environment.h libc/shared/rpc.h; do
  [ -f "$src/$f" ] || { echo "offlink: error: $src/$f missing (tests/llvm_offload/fetch.sh" \
                             "$src 22 device-runtime fetches the sources)" >&2; exit 1; }
done
bin=/usr/lib/llvm-22/bin
for tool in clang++ llvm-ar ld.lld; do
  [ -x "$bin/$tool" ] || { echo "offlink: error: $bin/$tool missing (apt-get install clang-22" \
                                "llvm-22 lld-22)" >&2; exit 1; }
done
src=$(cd "$src" && pwd)
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "$dest.tmp.XXXXXX")
tmp=$(cd "$tmp" && pwd)
trap 'rm -rf "$tmp"' EXIT

# CMake's compile_options for openmp/device (the order as there), then the per-target ones.
common=(-O3 -DNDEBUG -std=c++17 -flto -fvisibility=hidden -nogpulib -nostdlibinc -fno-rtti
        -fno-exceptions -fconvergent-functions -Wno-unknown-cuda-version
        -mllvm -vectorize-slp=false -DSHARED_SCRATCHPAD_SIZE=512
        -I "$src/openmp/device/include" -I "$src/libc" -I "$src/offload/include"
        -ffile-prefix-map="$src/"=)  # (the assertions' file names: the same bytes from any SRC)
sources=(Allocator Configuration Debug Kernel LibC Mapping Misc Parallelism Profiling Reduction
         State Synchronization Tasking DeviceUtils Workshare)

build() {  # triple, the runtime's name in the install (nvptx, amdgpu), per-target options
  local triple=$1 name=$2 out=$tmp/out/lib/$1 objs=$tmp/obj/$1
  shift 2
  mkdir -p "$out" "$objs"
  # Relative source paths: the bitcode records no folder of this machine.
  printf '%s\n' "${sources[@]}" | (cd "$src/openmp/device/src" && xargs -P 2 -I{} \
    "$bin/clang++" --target="$triple" "${common[@]}" "$@" -c {}.cpp -o "$objs/{}.o")
  # "Trick to combine these into a bitcode file via the linker's LTO pass" (CMakeLists.txt)
  (cd "$objs" && "$bin/clang++" --target="$triple" -flto -r -nostdlib -Wl,--lto-emit-llvm \
     "${sources[@]/%/.o}" -o "$out/libomptarget-$name.bc")
  (cd "$out" && "$bin/llvm-ar" rcsD libompdevice.a "libomptarget-$name.bc")
}
build nvptx64-nvidia-cuda nvptx --cuda-feature=+ptx63
build amdgcn-amd-amdhsa amdgpu -Xclang -mcode-object-version=none
touch "$tmp/out/.complete"
rm -rf "$dest"
mv "$tmp/out" "$dest"
