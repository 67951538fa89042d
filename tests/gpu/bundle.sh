#!/bin/bash
# Build, here, everything the GPU check needs into one folder: `tests/gpu/bundle.sh [OUTDIR]`
# (default .gpu-bundle/ in the checkout; git ignores it).  Then on a machine with the GPU,
# the NVIDIA driver and nothing else of ours: `OUTDIR/run.sh` (tests/gpu/run.sh); through the
# device tool, from the checkout: run(command="tests/gpu/run.sh .gpu-bundle", carry=[".gpu-bundle"]).
#
# Inside (MANIFEST.txt lists every file and its size; the whole stays under 60 MiB):
#   cuda/    samples/cuda_saxpy linked by offlink for sm_90 + compute_90 PTX (saxpy), PTX alone
#            (saxpy-ptx: the runtime JIT-links it), its C++ host (saxpy-cxx), the nvcc-built
#            twin (saxpy-twin: the CUDA runtime alone), and timing (tests/gpu/timing.c with
#            busy.c's kernel) with its image extracted (timing.image) for the driver-API twin
#   gcc/     samples/gcc_openmp and tests/gpu/gomp_vars.c (-foffload=nvptx-none, -misa=sm_80),
#            linked by offlink (offlink/) and by GCC's own link (gcc/); lib/: Debian gcc-12's
#            libgomp.so.1 and libgomp-plugin-nvptx.so.1
#   clang19/ samples/clang_openmp for --offload-arch=sm_90, linked by offlink (offlink/) and
#            by clang-19 (clang/); lib/: libomptarget.so.19.1 (its CUDA plugin is built in and
#            dlopens libcuda.so), libomp.so.5, libLLVM.so.19.1.xz (xz -3; run.sh unpacks it)
#   expected/  each program's expected output on a GPU; here/: what each printed here (no GPU)
# clang-22 is left out: its libLLVM.so.22.1 alone is ~34 MB with xz -3, over the budget.
#
# Needs: the checkout's venv (make venv; or OFFLINK=), CUDA (CUDA_HOME, default /usr/local/cuda),
# gcc-12 with gcc-12-offload-nvptx, clang-19 with clang-tools-19 and libomp-19-dev, xz.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${1:-$ROOT/.gpu-bundle}
OFFLINK=${OFFLINK:-$ROOT/.venv/bin/offlink}
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
LLVM19=/usr/lib/llvm-19/lib
LIMIT=$((60 * 1024 * 1024))
CUDA=nvptx64-nvidia-cuda

die() { echo "bundle.sh: error: $*" >&2; exit 1; }
need() { command -v "$1" >/dev/null 2>&1 || die "$1 not found ($2)"; }
need "$OFFLINK" "make venv, or set OFFLINK"
need "$CUDA_HOME/bin/nvcc" "CUDA 13 at CUDA_HOME"
need gcc "gcc-12"
need x86_64-linux-gnu-accel-nvptx-none-gcc-12 "apt-get install gcc-12-offload-nvptx nvptx-tools"
need clang-19 "apt-get install clang-19 clang-tools-19 libomp-19-dev"
need clang-offload-packager-19 "apt-get install clang-tools-19"
need xz "apt-get install xz-utils"
for f in "$LLVM19/libomptarget.so.19.1" "$LLVM19/libomp.so.5" "$LLVM19/libomptarget-nvptx-sm_90.bc"; do
  [ -e "$f" ] || die "$f missing (apt-get install libomp-19-dev)"
done
LIBLLVM19=$(ldd "$LLVM19/libomptarget.so.19.1" | awk '$1 == "libLLVM.so.19.1" { print $3 }')
[ -f "$LIBLLVM19" ] || die "libLLVM.so.19.1 not found (apt-get install libllvm19)"

case "$OUT" in /*) ;; *) OUT=$PWD/$OUT ;; esac
rm -rf "$OUT"
mkdir -p "$OUT"/{cuda,gcc/offlink,gcc/gcc,gcc/lib,clang19/offlink,clang19/clang,clang19/lib,expected,here}
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
export PATH="$CUDA_HOME/bin:$PATH"

# libLLVM is the long step (about a minute): compress it while the rest is built.
xz -3 -T0 -c "$LIBLLVM19" >"$OUT/clang19/lib/libLLVM.so.19.1.xz" &
XZ=$!

RT_CFLAGS=$("$OFFLINK" config --cflags)
RT_LIBS=$("$OFFLINK" config --libs)
GPU=$ROOT/tests/gpu

# ---- offlink's CUDA target ------------------------------------------------------------------
S=$ROOT/samples/cuda_saxpy
W=$WORK/cuda
mkdir -p "$W"
"$OFFLINK" cc --offload-target "$CUDA:sm_90,compute_90" gcc -O2 $RT_CFLAGS -I"$S" \
  -c "$S/kernels.c" -o "$W/kernels.o"
gcc -O2 $RT_CFLAGS -I"$S" -c "$S/main.c" -o "$W/main.o"
"$OFFLINK" link gcc "$W/kernels.o" "$W/main.o" $RT_LIBS -o "$OUT/cuda/saxpy"
"$OFFLINK" link --offload-target "$CUDA:compute_90" gcc "$W/kernels.o" "$W/main.o" $RT_LIBS \
  -o "$OUT/cuda/saxpy-ptx"
sed 's/saxpy, blocks, threads, N, 2.0f,/saxpy, blocks, threads, 1000, 2,/' "$S/main.c" >"$W/main.cc"
g++ -O2 $RT_CFLAGS -I"$S" -c "$W/main.cc" -o "$W/main-cxx.o"
"$OFFLINK" link g++ "$W/kernels.o" "$W/main-cxx.o" $RT_LIBS -o "$OUT/cuda/saxpy-cxx"
nvcc -O2 -rdc=true -gencode arch=compute_90,code=sm_90 -gencode arch=compute_90,code=compute_90 \
  -D__OFFLINK_TARGET_CUDA__=1 -I"$S" -I"$ROOT/offlink/runtime" "$GPU/saxpy_twin.cu" \
  -o "$OUT/cuda/saxpy-twin"
"$OFFLINK" cc --offload-target "$CUDA:sm_90,compute_90" gcc -O2 $RT_CFLAGS \
  -c "$GPU/busy.c" -o "$W/busy.o"
gcc -O2 -Wall -Wextra -Werror $RT_CFLAGS -c "$GPU/timing.c" -o "$W/timing.o"
"$OFFLINK" link gcc -rdynamic "$W/busy.o" "$W/timing.o" $RT_LIBS -lpthread -o "$OUT/cuda/timing"
"$OFFLINK" extract "$OUT/cuda/timing" --target "$CUDA" --output "$OUT/cuda/timing.image"
cp "$S/expected.txt" "$OUT/expected/saxpy.txt"
cp "$S/expected.txt" "$OUT/expected/saxpy-ptx.txt"
cp "$S/expected.txt" "$OUT/expected/saxpy-cxx.txt"
cp "$S/expected.txt" "$OUT/expected/saxpy-twin.txt"

# ---- GCC: nvptx-none images through libgomp -----------------------------------------------
OFFLOAD=(-fopenmp -foffload=nvptx-none -foffload-options=nvptx-none=-misa=sm_80)
W=$WORK/gcc
mkdir -p "$W"
S=$ROOT/samples/gcc_openmp
for n in main saxpy stats; do gcc -O2 "${OFFLOAD[@]}" -c "$S/$n.c" -o "$W/$n.o"; done
gcc -O2 "${OFFLOAD[@]}" -c "$GPU/gomp_vars.c" -o "$W/gomp_vars.o"
# offlink registers the image with libgomp by default once issue 24 lands; until then it
# takes --gomp-register.  Whichever it took is what the binary calls: GOMP_offload_register_ver.
registers() { nm -D "$1" 2>/dev/null | grep -q ' U GOMP_offload_register_ver'; }
GOMP_REGISTER=default
link_gcc() { # NAME OBJECTS...
  local name=$1
  shift
  "$OFFLINK" link gcc "${OFFLOAD[@]}" "$@" -o "$OUT/gcc/offlink/$name"
  if ! registers "$OUT/gcc/offlink/$name"; then
    "$OFFLINK" link --gomp-register gcc "${OFFLOAD[@]}" "$@" -o "$OUT/gcc/offlink/$name"
    GOMP_REGISTER=--gomp-register
  fi
  registers "$OUT/gcc/offlink/$name" || die "gcc/offlink/$name does not register with libgomp"
  gcc "${OFFLOAD[@]}" "$@" -o "$OUT/gcc/gcc/$name"
  registers "$OUT/gcc/gcc/$name" || die "GCC's own gcc/gcc/$name does not register with libgomp"
}
link_gcc gcc_openmp "$W/main.o" "$W/saxpy.o" "$W/stats.o"
link_gcc gomp_vars "$W/gomp_vars.o"
sed 's/^target regions ran on: .*/target regions ran on: a device/' "$S/expected.txt" \
  >"$OUT/expected/gcc_openmp.txt"
cat >"$OUT/expected/gomp_vars.txt" <<'EOF'
host table[3] before update: 3.0
table[3] = 4.5, table[4095] = 14332.5
counter = 15
sum = 14687232.0
teams > 0: 1
target regions ran on: a device
EOF
for lib in libgomp.so.1 libgomp-plugin-nvptx.so.1; do
  cp -L "$(gcc -print-file-name="$lib" | xargs readlink -f)" "$OUT/gcc/lib/$lib" 2>/dev/null ||
    cp -L "/usr/lib/x86_64-linux-gnu/$lib" "$OUT/gcc/lib/$lib"
done

# ---- clang 19: sm_90 images through libomptarget --------------------------------------------
NVPTX=(-fopenmp --offload-arch=sm_90 "--libomptarget-nvptx-bc-path=$LLVM19" "--cuda-path=$CUDA_HOME")
W=$WORK/clang
mkdir -p "$W"
S=$ROOT/samples/clang_openmp
for n in main vec math counter; do clang-19 -O2 -fPIC "${NVPTX[@]}" -c "$S/$n.c" -o "$W/$n.o"; done
for n in main_cxx shapes; do clang++-19 -O2 "${NVPTX[@]}" -c "$S/$n.cpp" -o "$W/$n.o"; done
OBJS=("$W/main.o" "$W/vec.o" "$W/math.o")
for by in offlink clang; do
  D=$OUT/clang19/$by
  LINK=()
  [ "$by" = offlink ] && LINK=("$OFFLINK" link)
  "${LINK[@]}" clang-19 "${NVPTX[@]}" -shared "$W/counter.o" -o "$D/libcounter.so"
  "${LINK[@]}" clang-19 "${NVPTX[@]}" "${OBJS[@]}" -L"$D" -lcounter -o "$D/clang_openmp"
  "${LINK[@]}" clang++-19 "${NVPTX[@]}" "$W/main_cxx.o" "$W/shapes.o" -o "$D/clang_openmp_cxx"
done
head -n 10 "$S/expected.txt" >"$OUT/expected/clang_openmp.txt"
tail -n +11 "$S/expected.txt" >"$OUT/expected/clang_openmp_cxx.txt"
cp -L "$LLVM19/libomptarget.so.19.1" "$LLVM19/libomp.so.5" "$OUT/clang19/lib/"

# ---- what each program prints here (no GPU: the host fallback, or an error) ------------------
here() { # NAME ENV... -- COMMAND...
  local name=$1
  shift
  env "$@" >"$OUT/here/$name.txt" 2>&1 || echo "(exit status $?)" >>"$OUT/here/$name.txt"
}
for p in saxpy saxpy-ptx saxpy-cxx saxpy-twin; do here "$p" "$OUT/cuda/$p"; done
for p in gcc_openmp gomp_vars; do
  here "$p.offlink" LD_LIBRARY_PATH="$OUT/gcc/lib" "$OUT/gcc/offlink/$p"
  here "$p.gcc" LD_LIBRARY_PATH="$OUT/gcc/lib" "$OUT/gcc/gcc/$p"
done
for by in offlink clang; do
  for p in clang_openmp clang_openmp_cxx; do
    here "$p.$by" LD_LIBRARY_PATH="$OUT/clang19/$by:$LLVM19" "$OUT/clang19/$by/$p"
  done
done
here timing-first "$OUT/cuda/timing" first
here timing-threads "$OUT/cuda/timing" threads 8 3 1000

wait "$XZ" || die "xz of $LIBLLVM19 failed"
cp "$GPU/run.sh" "$OUT/run.sh"
chmod +x "$OUT/run.sh"

# ---- the manifest, and the budget ---------------------------------------------------------
{
  echo "# GPU check bundle, built $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(uname -n)"
  echo "offlink: $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
  echo "offlink link of GCC objects registers with libgomp by: $GOMP_REGISTER"
  echo "nvcc: $(nvcc --version | tail -n 2 | head -n 1)"
  echo "gcc: $(gcc --version | head -n 1)"
  echo "clang-19: $(clang-19 --version | head -n 1)"
  echo "libraries: $(dpkg-query -W -f '${Package} ${Version}, ' libgomp1 libgomp-plugin-nvptx1 \
    libomp5-19 libllvm19 2>/dev/null | sed 's/, $//')"
  echo "glibc needed (highest GLIBC_ version any file names): $(
    find "$OUT" -type f ! -name '*.xz' ! -name '*.txt' -exec objdump -T {} + 2>/dev/null |
      grep -o 'GLIBC_2\.[0-9]*' | sort -t. -k2 -n | tail -n 1)"
  echo
  echo "# bytes path"
  (cd "$OUT" && find . -type f ! -name MANIFEST.txt -printf '%s %P\n' | sort -k2)
} >"$OUT/MANIFEST.txt"
TOTAL=$(du -sb "$OUT" | cut -f1)
echo "total bytes: $TOTAL" >>"$OUT/MANIFEST.txt"
[ "$TOTAL" -le "$LIMIT" ] || die "the bundle is $TOTAL bytes, over $LIMIT"
echo "bundle: $OUT ($TOTAL bytes)"
