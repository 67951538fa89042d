#!/bin/bash
# The GPU check: `run.sh [BUNDLEDIR]` (default: the folder this script is in), from a bundle
# that tests/gpu/bundle.sh built.  Needs only the NVIDIA driver (libcuda.so.1, nvidia-smi),
# bash and coreutils; xz or python3 to unpack libLLVM.  Writes one report, gpu-report.md, into
# $OUT when set, else into the bundle folder, and prints its path and summary.
#
# For each program: its output against the expected one and against its own-toolchain twin,
# the kernels that ran on the GPU (offlink: OFFLINK_CUDA_INFO=1; libgomp: GOMP_DEBUG=1;
# libomptarget: LIBOMPTARGET_INFO=16), with host fallback made an error (OFFLINK_MANDATORY=1,
# OMP_TARGET_OFFLOAD=MANDATORY).  Then timings: first offlink_translate and offlink_launch
# against cuModuleLoadData and cuLaunchKernel of the same kernel, and 1 and 8 threads launching
# at once, each with offlink's per-thread streams and with OFFLINK_CUDA_SYNC_LAUNCH=1 (the NULL
# stream and cuCtxSynchronize it had before).
#
# Exit status: 0 every check passed; 1 a check failed (the report says which); 2 the bundle is
# incomplete or unusable; 77 no GPU here (the report and stdout say "SKIP: no GPU: why"; the
# automake convention for a skipped test).  GPU_CHECK_FORCE=1 runs every step even without a
# GPU (its checks then fail: a way to try the script itself on a CPU machine).
set -uo pipefail

B=$(cd "${1:-$(dirname "$0")}" && pwd) || exit 2
REPORT_DIR=${OUT:-$B}
REPORT=$REPORT_DIR/gpu-report.md
STEP_TIMEOUT=${GPU_CHECK_TIMEOUT:-60} # seconds for one program run
WORK=$(mktemp -d)
trap 'rm -rf "$WORK"' EXIT
mkdir -p "$REPORT_DIR"
: >"$REPORT"

say() { printf '%s\n' "$@" >>"$REPORT"; }
block() { # TITLE FILE [LINES]: a file's text in the report, its last LINES lines at most
  local n=${3:-60}
  say "<details><summary>$1</summary>" "" '```'
  if [ "$(wc -l <"$2")" -gt "$n" ]; then
    echo "... ($(wc -l <"$2") lines, the last $n:)" >>"$REPORT"
  fi
  tail -n "$n" "$2" >>"$REPORT"
  say '```' "</details>" ""
}
FAILED=()
fail() { FAILED+=("$*"); say "**FAIL**: $*" ""; }

# ---- the machine ------------------------------------------------------------------------------
say "# offlink GPU check" "" "- date: $(date -u +%Y-%m-%dT%H:%M:%SZ)" "- bundle: $B" \
  "- kernel: $(uname -srm)" "- libc: $(ldd --version 2>&1 | head -n 1)" ""
if [ -f "$B/MANIFEST.txt" ]; then
  say "Bundle (MANIFEST.txt):" "" '```'
  sed -n '1,/^$/p' "$B/MANIFEST.txt" >>"$REPORT"
  say '```' ""
  missing=$(sed -n '/^# bytes path/,/^total/p' "$B/MANIFEST.txt" | awk 'NF == 2 && $1 ~ /^[0-9]+$/ { print $2 }' |
    while read -r f; do [ -e "$B/$f" ] || echo "$f"; done)
  if [ -n "$missing" ]; then
    say "**The bundle is incomplete**; missing:" "" "$missing"
    echo "run.sh: the bundle in $B is incomplete (see $REPORT)" >&2
    exit 2
  fi
else
  say "**No MANIFEST.txt**: $B is not a bundle from tests/gpu/bundle.sh"
  echo "run.sh: $B is not a GPU check bundle (no MANIFEST.txt)" >&2
  exit 2
fi

# A copy that lost its modes (carried as plain files) still runs: every program and library.
find "$B/cuda" "$B/gcc" "$B/clang19" -type f ! -perm -u+x ! -name '*.image' ! -name '*.xz' \
  -exec chmod u+x {} + 2>/dev/null

libcuda() { # the driver's libcuda.so.1, as the dynamic loader would find it
  local p
  p=$(ldconfig -p 2>/dev/null | awk '$1 == "libcuda.so.1" && /x86-64/ { print $NF; exit }')
  for d in ${LD_LIBRARY_PATH:+${LD_LIBRARY_PATH//:/ }} /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/local/nvidia/lib64 \
    /usr/local/nvidia/lib /usr/lib/wsl/lib; do
    [ -n "$p" ] && break
    [ -e "$d/libcuda.so.1" ] && p=$d/libcuda.so.1
  done
  [ -n "$p" ] && readlink -f "$p"
}

NO_GPU=
if ! command -v nvidia-smi >/dev/null 2>&1; then
  NO_GPU="nvidia-smi not found"
elif ! nvidia-smi -L >"$WORK/smi-L" 2>&1 || ! grep -q '^GPU ' "$WORK/smi-L"; then
  NO_GPU="nvidia-smi lists no GPU ($(head -n 1 "$WORK/smi-L"))"
elif [ -z "$(libcuda)" ]; then
  NO_GPU="no libcuda.so.1 (the NVIDIA driver's library)"
fi
if [ -n "$NO_GPU" ] && [ "${GPU_CHECK_FORCE:-0}" != 1 ]; then
  say "SKIP: no GPU: $NO_GPU"
  echo "SKIP: no GPU: $NO_GPU (report: $REPORT)"
  exit 77
fi
[ -n "$NO_GPU" ] && say "**No GPU ($NO_GPU); GPU_CHECK_FORCE=1: every step runs anyway.**" ""

say "## The GPU" "" '```'
{
  nvidia-smi 2>&1
  nvidia-smi --query-gpu=name,driver_version,compute_cap,memory.total --format=csv 2>&1
  echo "libcuda.so.1: $(libcuda)"
} >>"$REPORT"
say '```' ""

# libomptarget 19 dlopens "libcuda.so" (the unversioned name): give it one beside the rest.
mkdir -p "$WORK/lib"
[ -n "$(libcuda)" ] && ln -s "$(libcuda)" "$WORK/lib/libcuda.so"
if command -v xz >/dev/null 2>&1; then
  xz -dc "$B/clang19/lib/libLLVM.so.19.1.xz" >"$WORK/lib/libLLVM.so.19.1"
else
  python3 -c 'import lzma, shutil, sys; shutil.copyfileobj(lzma.open(sys.argv[1]), open(sys.argv[2], "wb"))' \
    "$B/clang19/lib/libLLVM.so.19.1.xz" "$WORK/lib/libLLVM.so.19.1"
fi || fail "cannot unpack libLLVM.so.19.1.xz"

# ---- the programs -----------------------------------------------------------------------------
# run_prog ID [VAR=VALUE...] COMMAND...: WORK/ID.{out,err,rc,secs}
run_prog() {
  local id=$1 s e
  shift
  s=$(date +%s.%N)
  # A subshell, so that its note of a crash ("Segmentation fault") lands in the run's stderr.
  (
    timeout "$STEP_TIMEOUT" env "$@"
    echo $? >"$WORK/$id.rc"
  ) >"$WORK/$id.out" 2>"$WORK/$id.err"
  e=$(date +%s.%N)
  awk -v s="$s" -v e="$e" 'BEGIN { printf "%.2f\n", e - s }' >"$WORK/$id.secs"
}

# kernels KIND ID: the kernels the run's log says ran on the GPU, "count name" a line
kernels() {
  local f=$WORK/$2.err
  case $1 in
  cuda) sed -n "s/^offlink: cuda: kernel '\([^']*\)' ran on GPU.*/\1/p" "$f" ;;
  gomp) sed -n 's/.*: kernel \([^ :]*\): launch \[.*/\1/p' "$f" ;; # GOMP_OFFLOAD_run's
  omptarget) sed -n 's/.*Launching kernel \([^ ]*\) with.*/\1/p' "$f" ;;
  esac | sort | uniq -c | awk '{ print $1, $2 }'
}

ROWS=()
# check KIND NAME TWIN_ID ID: compare ID's run with the expected output and with its twin's
check() {
  local kind=$1 name=$2 twin=$3 id=$4 exp=$B/expected/$2.txt vs_exp vs_twin k
  if [ "$(cat "$WORK/$id.rc")" != 0 ]; then
    vs_exp="exit $(cat "$WORK/$id.rc")"
  elif diff -u "$exp" "$WORK/$id.out" >"$WORK/$id.diff"; then
    vs_exp=same
  else
    vs_exp=differs
  fi
  if [ -z "$twin" ]; then
    vs_twin=-
  elif cmp -s "$WORK/$twin.out" "$WORK/$id.out"; then
    vs_twin=same
  else
    vs_twin=differs
    diff -u "$WORK/$twin.out" "$WORK/$id.out" >"$WORK/$id.twin.diff"
  fi
  kernels "$kind" "$id" >"$WORK/$id.kernels"
  k=$(awk '{ n += $1 } END { printf "%d launches of %d kernels", n, NR }' "$WORK/$id.kernels")
  if [ -n "$twin" ] && [ "$kind" != cuda ]; then
    kernels "$kind" "$twin" >"$WORK/$twin.kernels"
    cmp -s "$WORK/$twin.kernels" "$WORK/$id.kernels" && k="$k (as the twin)" ||
      k="$k (twin: $(awk '{ n += $1 } END { printf "%d launches of %d kernels", n, NR }' "$WORK/$twin.kernels"))"
  fi
  ROWS+=("| $id | $vs_exp | $vs_twin | $k | $(cat "$WORK/$id.secs") s |")
  say "### $id" "" "- expected (expected/$name.txt): $vs_exp; twin ${twin:-(none)}: $vs_twin" \
    "- on the GPU: $k" ""
  [ -s "$WORK/$id.kernels" ] && block "kernels launched (count name)" "$WORK/$id.kernels" 40
  block "stdout" "$WORK/$id.out" 40
  block "stderr" "$WORK/$id.err" 40
  [ -s "$WORK/$id.diff" ] && [ "$vs_exp" = differs ] && block "diff expected" "$WORK/$id.diff"
  [ -s "$WORK/$id.twin.diff" ] && block "diff twin" "$WORK/$id.twin.diff"
  [ "$vs_exp" = same ] || fail "$id: output $vs_exp (expected/$name.txt)"
  [ -z "$twin" ] || [ "$vs_twin" = same ] || fail "$id: output differs from its twin $twin"
  [ -s "$WORK/$id.kernels" ] || [ "$id" = saxpy-twin ] || fail "$id: no kernel ran on the GPU"
}

say "## Programs" ""
say "### offlink's CUDA target (sm_90 + compute_90 PTX; PTX alone; C++ host; nvcc's twin)" ""
run_prog saxpy-twin "$B/cuda/saxpy-twin"
CUDA_ENV=(OFFLINK_MANDATORY=1 OFFLINK_CUDA_INFO=1)
for p in saxpy saxpy-ptx saxpy-cxx; do run_prog "$p" "${CUDA_ENV[@]}" "$B/cuda/$p"; done
check cuda saxpy-twin "" saxpy-twin
for p in saxpy saxpy-ptx saxpy-cxx; do check cuda "$p" saxpy-twin "$p"; done
run_prog saxpy-sync "${CUDA_ENV[@]}" OFFLINK_CUDA_SYNC_LAUNCH=1 "$B/cuda/saxpy"
check cuda saxpy saxpy-twin saxpy-sync

say "### GCC 12: nvptx-none (-misa=sm_80) through libgomp (Debian's libgomp and nvptx plugin)" ""
GOMP_ENV=(LD_LIBRARY_PATH="$B/gcc/lib:$WORK/lib" GOMP_DEBUG=1 OMP_TARGET_OFFLOAD=MANDATORY)
for p in gcc_openmp gomp_vars; do
  run_prog "$p.gcc" "${GOMP_ENV[@]}" "$B/gcc/gcc/$p"
  run_prog "$p.offlink" "${GOMP_ENV[@]}" "$B/gcc/offlink/$p"
  check gomp "$p" "" "$p.gcc"
  check gomp "$p" "$p.gcc" "$p.offlink"
done

say "### clang 19: sm_90 through libomptarget 19" ""
for p in clang_openmp clang_openmp_cxx; do
  for by in clang offlink; do
    run_prog "$p.$by" LD_LIBRARY_PATH="$B/clang19/$by:$B/clang19/lib:$WORK/lib" \
      LIBOMPTARGET_INFO=16 OMP_TARGET_OFFLOAD=MANDATORY "$B/clang19/$by/$p"
  done
  check omptarget "$p" "" "$p.clang"
  check omptarget "$p" "$p.clang" "$p.offlink"
done

# ---- timings ----------------------------------------------------------------------------------
say "## Timings (cuda/timing: busy.c's kernel, one block of 256 threads)" ""
T=$B/cuda/timing
for i in 1 2 3; do
  run_prog "first$i" OFFLINK_MANDATORY=1 "$T" first
  run_prog "direct$i" "$T" direct "$B/cuda/timing.image"
done
say "First use in a fresh process (three processes each): offlink_translate loads the driver," \
  "the context and the image; the twin does dlopen .. cuModuleLoadData .. cuModuleGetFunction." "" '```'
for i in 1 2 3; do cat "$WORK/first$i.out" "$WORK/first$i.err" "$WORK/direct$i.out" "$WORK/direct$i.err"; done >>"$REPORT"
say '```' ""
for i in 1 2 3; do
  grep -q 'offlink first launch' "$WORK/first$i.out" || fail "timing first (run $i): $(tail -n 1 "$WORK/first$i.err")"
  grep -q 'direct first launch' "$WORK/direct$i.out" || fail "timing direct (run $i): $(tail -n 1 "$WORK/direct$i.err")"
done

LAUNCHES=${GPU_CHECK_LAUNCHES:-20}
ROUNDS=${GPU_CHECK_ROUNDS:-100000}
say "Threads launching at once: each thread launches busy $LAUNCHES times (one block," \
  "$ROUNDS rounds), after one untimed launch; the wall time from all starting to all done," \
  "three runs each. 'streams' is offlink now (each thread's own stream, CU_STREAM_PER_THREAD, and" \
  "cuStreamSynchronize of it);" \
  "'sync' is OFFLINK_CUDA_SYNC_LAUNCH=1 (the NULL stream and cuCtxSynchronize, as before)." "" \
  "| threads | rounds | way | ms (3 runs) |" "| --- | --- | --- | --- |"
TFAILED=()
for rounds in "$ROUNDS" 0; do
  for n in 1 8; do
    for way in streams sync; do
      sync=0
      [ "$way" = sync ] && sync=1
      ms=()
      for i in 1 2 3; do
        id=threads-$n-$rounds-$way-$i
        run_prog "$id" OFFLINK_MANDATORY=1 OFFLINK_CUDA_SYNC_LAUNCH=$sync "$T" threads "$n" "$LAUNCHES" "$rounds"
        if grep -q 'counts ok' "$WORK/$id.out"; then
          ms+=("$(sed -n 's/.*: \([0-9.]*\) ms, counts ok/\1/p' "$WORK/$id.out")")
        else
          ms+=(FAILED)
          TFAILED+=("$id: $(cat "$WORK/$id.out" "$WORK/$id.err" | tail -n 2 | tr '\n' ' ')")
        fi
      done
      say "| $n | $rounds | $way | ${ms[*]} |"
    done
  done
done
say ""
for f in "${TFAILED[@]}"; do fail "$f"; done

# ---- summary ----------------------------------------------------------------------------------
SUMMARY=$WORK/summary
{
  echo "## Summary"
  echo
  echo "| run | vs expected | vs twin | on the GPU | time |"
  echo "| --- | --- | --- | --- | --- |"
  printf '%s\n' "${ROWS[@]}"
  echo
  if [ ${#FAILED[@]} -eq 0 ]; then
    echo "PASS: every check passed"
  else
    echo "FAIL: ${#FAILED[@]} checks failed:"
    printf -- '- %s\n' "${FAILED[@]}"
  fi
} >"$SUMMARY"
cat "$SUMMARY" >>"$REPORT"
cat "$SUMMARY"
echo "report: $REPORT"
[ ${#FAILED[@]} -eq 0 ]
