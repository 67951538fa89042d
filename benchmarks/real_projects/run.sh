#!/usr/bin/env bash
# Two OpenMP offload projects nobody here wrote, built unmodified by their own build systems
# with GCC's and clang's offload flags, once plainly and once through offlink; each pair is run
# and compared, then relinked after one source edit, timed (README.md beside this file).
#
#     benchmarks/real_projects/run.sh XSBENCH_DIR BABELSTREAM_DIR [REPEATS]
#
# XSBENCH_DIR: a checkout of ANL-CESAR/XSBench (its openmp-offload/ folder: plain make);
# BABELSTREAM_DIR: a checkout of UoB-HPC/BabelStream (CMake, -DMODEL=omp -DOFFLOAD=ON). Neither is
# in this repository (their sources come from no package registry). Prints a Markdown table.
set -euo pipefail
xsbench=$(realpath "$1")
babel=$(realpath "$2")
repeats=${3:-3}
offlink=${OFFLINK:-offlink}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
export OFFLINK_PROGRESS=0 OFFLINK_CACHE_DIR="$work/cache" LD_LIBRARY_PATH=/usr/lib/llvm-19/lib
unset MAKEFLAGS

gcc_offload="-fopenmp -foffload=nvptx-none -foffload-options=nvptx-none=-misa=sm_80"
clang_offload="-fopenmp -fopenmp-targets=x86_64-pc-linux-gnu"

seconds() { local t0 t1; t0=$(date +%s.%N); "$@" >/dev/null 2>&1; t1=$(date +%s.%N)
            printf "%.2f\n" "$(echo "$t1 - $t0" | bc)"; }
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }

# run PROGRAM ARGS...: its output, and the number of kernel launches libomptarget reports
# (clang: LIBOMPTARGET_INFO=16 prints one line per launch; GCC's nvptx regions run on the
# host here, with no GPU, and libgomp reports none).
launches() { { LIBOMPTARGET_INFO=16 "$@" 2>&1 >/dev/null || true; } | grep -c "Launching kernel" ||
             true; }

xsbench_build() {  # FOLDER CC CFLAGS [offlink]
  local dir=$1 cc=$2 flags=$3 via=${4:-}
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$xsbench/openmp-offload/." "$dir"
  make -s -C "$dir" CC="${via:+$offlink cc }$cc" CFLAGS="-std=gnu99 -O3 $flags" \
    >/dev/null 2>&1
}
# XSBench exits 1 when its checksum is not the one it knows for the default problem: the
# checksums of the two builds are compared instead.
xsbench_run() { { "${run_env[@]}" "$1/XSBench" -m event -s small -G nuclide -l 20000 || true; } |
                grep "checksum"; }
xsbench_relink() {  # FOLDER CC CFLAGS [offlink]: one edit of io.c, then make
  local dir=$1 cc=$2 flags=$3 via=${4:-}
  echo "/* edit $RANDOM$RANDOM */" >> "$dir/io.c"
  seconds make -s -C "$dir" CC="${via:+$offlink cc }$cc" CFLAGS="-std=gnu99 -O3 $flags"
}

babel_build() {  # FOLDER CXX FLAGS [offlink]
  local dir=$1 cxx=$2 flags=$3 via=${4:-}
  rm -rf "$dir" && mkdir -p "$dir" && cp -r "$babel/." "$dir/src-tree"
  cmake -S "$dir/src-tree" -B "$dir/b" -G Ninja -DMODEL=omp -DCMAKE_CXX_COMPILER="$cxx" \
    -DOFFLOAD=ON -DOFFLOAD_FLAGS="$flags" \
    ${via:+-DCMAKE_CXX_LINKER_LAUNCHER="$offlink;link"} >/dev/null 2>&1
  cmake --build "$dir/b" >/dev/null 2>&1
}
babel_run() { "${run_env[@]}" "$1/b/omp-stream" -s 100000 -n 3 | grep -ci "fail" || true; }
babel_relink() {
  local dir=$1
  echo "// edit $RANDOM$RANDOM" >> "$dir/src-tree/src/main.cpp"
  seconds cmake --build "$dir/b"
}

echo "| project | toolchain | plain: output | offlink: output | kernel launches plain / offlink | relink after one edit, plain | through offlink |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for tc in gcc clang; do
  if [ $tc = gcc ]; then cc=gcc cxx=g++ flags=$gcc_offload; else cc=clang-19 cxx=clang++-19 flags=$clang_offload; fi
  run_env=(env); [ $tc = clang ] && run_env=(env OMP_TARGET_OFFLOAD=MANDATORY)
  # XSBench (make)
  xsbench_build "$work/xs-plain-$tc" "$cc" "$flags"
  xsbench_build "$work/xs-offlink-$tc" "$cc" "$flags" offlink
  "$offlink" inspect "$work/xs-offlink-$tc/XSBench" | grep ".openmp_target" >/dev/null
  plain=$(xsbench_run "$work/xs-plain-$tc")
  through=$(xsbench_run "$work/xs-offlink-$tc")
  [ "${plain%%(*}" = "${through%%(*}" ] || { echo "XSBench $tc: $plain != $through" >&2; exit 1; }
  lp=$(launches "${run_env[@]}" "$work/xs-plain-$tc/XSBench" -m event -s small -G nuclide -l 2000)
  lo=$(launches "${run_env[@]}" "$work/xs-offlink-$tc/XSBench" -m event -s small -G nuclide -l 2000)
  tp=$(for _ in $(seq "$repeats"); do xsbench_relink "$work/xs-plain-$tc" "$cc" "$flags"; done | median)
  to=$(for _ in $(seq "$repeats"); do xsbench_relink "$work/xs-offlink-$tc" "$cc" "$flags" offlink; done | median)
  echo "| XSBench (make) | $tc | ${plain%% (*} | ${through%% (*} | $lp / $lo | ${tp} s | ${to} s |"
  # BabelStream (CMake)
  babel_build "$work/bs-plain-$tc" "$cxx" "$flags"
  babel_build "$work/bs-offlink-$tc" "$cxx" "$flags" offlink
  "$offlink" inspect "$work/bs-offlink-$tc/b/omp-stream" | grep ".openmp_target" >/dev/null
  fp=$(babel_run "$work/bs-plain-$tc")
  fo=$(babel_run "$work/bs-offlink-$tc")
  [ "$fp" = 0 ] && [ "$fo" = 0 ] || { echo "BabelStream $tc: validation failed" >&2; exit 1; }
  lp=$(launches "${run_env[@]}" "$work/bs-plain-$tc/b/omp-stream" -s 100000 -n 3)
  lo=$(launches "${run_env[@]}" "$work/bs-offlink-$tc/b/omp-stream" -s 100000 -n 3)
  tp=$(for _ in $(seq "$repeats"); do babel_relink "$work/bs-plain-$tc"; done | median)
  to=$(for _ in $(seq "$repeats"); do babel_relink "$work/bs-offlink-$tc"; done | median)
  echo "| BabelStream (CMake) | $tc | validates | validates | $lp / $lo | ${tp} s | ${to} s |"
done
