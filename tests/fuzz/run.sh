#!/usr/bin/env bash
# Build the libFuzzer harness over offlink/runtime/table.c with ASan and UBSan, then run it for
# SECONDS (default 60) from the kept corpus. Exit status non-zero on any finding.
#   tests/fuzz/run.sh [SECONDS] [more libFuzzer options...]
# CLANG picks the compiler; FUZZ_BUILD_DIR keeps the build, new inputs and crash artifacts
# (default: a fresh temporary directory). The kept corpus (tests/fuzz/corpus) is only read:
# new inputs go to the build directory, so a run never changes the repository.
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../.." && pwd)"
seconds="${1:-60}"
shift || true
clang="${CLANG:-clang}"
out="${FUZZ_BUILD_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/offlink-fuzz.XXXXXX")}"
mkdir -p "$out/corpus" "$out/artifacts"

"$clang" -g -O1 -fno-omit-frame-pointer \
  -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
  -I"$root/offlink/runtime" "$here/fuzz_table.c" "$root/offlink/runtime/table.c" \
  -o "$out/fuzz_table"

echo "offlink fuzz: ${seconds}s, build and artifacts in $out" >&2
status=0
UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1" \
  "$out/fuzz_table" -max_total_time="$seconds" -max_len=8192 -timeout=10 -rss_limit_mb=2048 \
  -dict="$here/table.dict" -artifact_prefix="$out/artifacts/" -print_final_stats=1 \
  "$out/corpus" "$here/corpus" "$@" || status=$?
if [ "$status" -ne 0 ]; then
  echo "offlink fuzz: FINDING (exit $status); reproduce with: $out/fuzz_table $out/artifacts/*" >&2
fi
exit "$status"
