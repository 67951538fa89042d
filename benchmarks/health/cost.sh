#!/bin/bash
# Issue 31's cost of the health work, before and after, side by side in one run:
#
#   benchmarks/health/cost.sh BEFORE_REV [AFTER_REV]     (AFTER_REV: HEAD)
#
# Rows: GCC 30 CUs (cold, one CU changed), clang-22 default objects 30 CUs (cold, one CU
# changed), a link with no target code, and `offlink cc`'s warm hit (CPU of one compile).
# Each revision is exported (git archive) with this checkout's built _ctable module and runtime
# library copied in and byte-compiled, and run as `python -m offlink` from its folder, so both
# sides start up the same way. Run it on a quiet machine: the figures are medians of
# interleaved runs, and the ratios are only meaningful within one run. RUNS sets the repeats.
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=${1:?usage: benchmarks/health/cost.sh BEFORE_REV [AFTER_REV]}
AFTER=${2:-HEAD}
RUNS=${RUNS:-7}
PY=${PY:-$PWD/.venv/bin/python}
OUT=${OUT:-$(mktemp -d /tmp/offlink-cost-XXXXXX)}
. benchmarks/exports.sh
set -x
uptime
"$PY" benchmarks/gcc_offload/bench.py --cus 30 --repeat "$RUNS" --offlink "before=$OLD" \
    --offlink "after=$NEW"
"$PY" benchmarks/clang/bench.py --cus 30 --modes elf --release 22 --repeat "$RUNS" \
    --offlink "before=$OLD" --offlink "after=$NEW"
"$PY" benchmarks/health/no_target.py --runs $((RUNS * 3)) "before=$OLD" "after=$NEW"
"$PY" benchmarks/cc_build/one_cu.py --runs $((RUNS * 3)) "$OUT/before" "$OUT/after"
uptime
echo "outputs in $OUT"
