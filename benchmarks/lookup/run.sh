#!/usr/bin/env bash
# The lookup benchmark (benchmarks/lookup/RESULTS.md): the C core against a binary search, a
# red-black tree and a splay tree, then Table from Python against dict.get and bisect, on tables
# of 1k, 100k and 1M symbols. One core, pinned; best-of-N timings.
#   benchmarks/lookup/run.sh [SIZE ...]          (default: 1000 100000 1000000)
# PYTHON: an interpreter where offlink and its C extension are installed (pip install -e .);
# BENCH_DIR: where tables and the C program go (default $TMPDIR/offlink-bench-lookup);
# BENCH_CPU: the CPU to pin to (default 1).
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
python="${PYTHON:-python3}"
cc="${CC:-cc}"
work="${BENCH_DIR:-${TMPDIR:-/tmp}/offlink-bench-lookup}"
sizes=("$@")
[ "${#sizes[@]}" -gt 0 ] || sizes=(1000 100000 1000000)
mkdir -p "$work"

"$python" -c 'import offlink.table as t, sys; sys.exit(t.backend() != "c")' || {
  echo "run.sh: $python does not load offlink's C extension (pip install -e $root)" >&2
  exit 1
}
"$python" "$here/gen.py" "$work" "${sizes[@]}" >/dev/null
"$cc" -O2 -std=c11 -I"$root/offlink/runtime" "$here/bench.c" "$root/offlink/runtime/table.c" \
  -o "$work/bench"
pin=()
if command -v taskset >/dev/null; then pin=(taskset -c "${BENCH_CPU:-1}"); fi

echo "# $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(nproc) CPUs;" \
  "$("$cc" --version | head -1); $("$python" -c 'import sys; print(sys.version.split()[0])')"
echo "# load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
"${pin[@]}" "$work/bench" --memory-latency
for n in "${sizes[@]}"; do
  echo
  "${pin[@]}" "$work/bench" "$work/table-$n.bin"
done
echo
tables=()
for n in "${sizes[@]}"; do tables+=("$work/table-$n.bin"); done
"${pin[@]}" "$python" "$here/bench.py" "${tables[@]}"
echo "# load average after: $(cut -d' ' -f1-3 /proc/loadavg)"
