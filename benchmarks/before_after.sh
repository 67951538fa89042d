#!/bin/bash
# Every benchmark of issues 10 and 11 in one run, two offlink trees side by side:
#
#   benchmarks/before_after.sh BEFORE_REV [AFTER_REV]     (AFTER_REV: HEAD)
#
# QUICK=1 leaves out the rows that no change since has touched (fill, first translate) and the
# 7-repeat runs of the 30-CU GCC and clang comparisons.
#
# Each revision is exported (git archive) with the built _ctable module and runtime library
# copied in and byte-compiled, and run as `python -m offlink` from its folder, so both sides
# start up the same way (no editable-install hook). Run it on a quiet machine: the figures
# are medians of interleaved runs, and the ratios are only meaningful within one run.
# Outputs go to $OUT (default: a new folder under /tmp); RESULTS files are not touched.
set -euo pipefail
cd "$(dirname "$0")/.."
BEFORE=${1:?usage: benchmarks/before_after.sh BEFORE_REV [AFTER_REV]}
AFTER=${2:-HEAD}
PY=${PY:-$PWD/.venv/bin/python}
OUT=${OUT:-$(mktemp -d /tmp/offlink-before-after-XXXXXX)}
. benchmarks/exports.sh
set -x
uptime
"$PY" benchmarks/cc_build/bench.py --runs 3 --src "$OUT/after" --before-src "$OUT/before" \
    --out "$OUT/cc_build.md"
"$PY" benchmarks/cc_build/lua.py --runs 3 "$OUT/before" "$OUT/after"
"$PY" benchmarks/link/nothing_changed.py --cus 1000 --runs 9 --offlink-src "$OUT/after" \
    --before-src "$OUT/before" --project "$OUT/proj1000" --out "$OUT/nothing_changed.md"
"$PY" benchmarks/gcc_offload/bench.py --cus 30,300 --repeat 3 --offlink "before=$OLD" \
    --offlink "after=$NEW"
"$PY" benchmarks/clang/bench.py --cus 30,300 --modes lto --repeat 3 --offlink "before=$OLD" \
    --offlink "after=$NEW"
if [ -x "${CUDA_HOME:-/usr/local/cuda}/bin/ptxas" ]; then  # sm_80: linked, not run (no GPU needed)
    "$PY" benchmarks/clang/bench.py --cus 30 --modes lto --repeat 3 --arch sm_80 \
        --offlink "before=$OLD" --offlink "after=$NEW"
fi
if [ "${QUICK:-}" != 1 ]; then
    "$PY" benchmarks/fill/bench.py --runs 7 --offlink "before=$OLD" --offlink "after=$NEW"
    env PYTHONPATH="$OUT/after" "$PY" benchmarks/runtime_first_translate/bench.py \
        2750 5500 11000 22000 44000
    "$PY" benchmarks/clang/bench.py --cus 30 --modes lto --repeat 7 --offlink "before=$OLD" \
        --offlink "after=$NEW"
    "$PY" benchmarks/gcc_offload/bench.py --cus 30 --repeat 7 --offlink "before=$OLD" \
        --offlink "after=$NEW"
fi
uptime
echo "outputs in $OUT"
