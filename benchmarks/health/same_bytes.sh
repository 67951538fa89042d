#!/bin/bash
# Every sample linked by two offlinks, compared byte for byte (issue 31: "the same bytes"):
#
#   benchmarks/health/same_bytes.sh BEFORE_OFFLINK AFTER_OFFLINK
#
# Each offlink is a command (e.g. /work/wt-before/.venv/bin/offlink). Each sample is copied once
# into a scratch folder and built there with `make run` twice, once per offlink, each side with
# an empty cache of its own; the build folder of each side is kept and every file in them
# compared with cmp. `offlink config` (the runtime's flags and library, which offlink's own
# samples link against) is the after side's on both sides, so the link alone is compared.
# CUDA's samples need nvcc and ptxas as .ci/run installs them.
set -euo pipefail
cd "$(dirname "$0")/../.."
BEFORE=${1:?usage: same_bytes.sh BEFORE_OFFLINK AFTER_OFFLINK}
AFTER=${2:?usage: same_bytes.sh BEFORE_OFFLINK AFTER_OFFLINK}
OUT=${OUT:-$(mktemp -d /tmp/offlink-same-bytes-XXXXXX)}
samples=(multi_cu exe_dso cxx gcc_openmp gcc_openacc gcc_fortran gcc_shared gcc_amdgcn
         clang_openmp users_openmp cuda_saxpy flang_openmp)
same=0
differ=0
for s in "${samples[@]}"; do
    for side in before after; do
        offlink=$([ $side = before ] && echo "$BEFORE" || echo "$AFTER")
        rm -rf "$OUT/work/$s"
        mkdir -p "$OUT/work" "$OUT/$side"
        cp -r "samples/$s" "$OUT/work/$s"
        if [ $side = after ]; then
            # The toolchain's own objects are the before side's (GCC's LTO sections carry a
            # random suffix per compile): only what offlink makes is made again.
            cp -r "$OUT/before/$s" "$OUT/work/$s/build"
            find "$OUT/work/$s/build" -type f ! -name '*.o' ! -name '*.a' ! -name '*.mod' -delete
            # all one time, after the sources' (make compiles nothing for an older file)
            sleep 1
            find "$OUT/work/$s/build" -type f -exec touch -d "@$(date +%s)" {} +
            if grep -q 'OFFLINK) cc' "samples/$s/Makefile"; then
                find "$OUT/work/$s/build" -type f -delete
            fi
        fi
        # The runtime's flags are the after side's on both sides (the link is what is compared).
        wrapper=$OUT/$side-offlink
        printf '#!/bin/sh\nif [ "$1" = config ]; then exec %s "$@"; fi\nexec %s "$@"\n' \
            "$AFTER" "$offlink" > "$wrapper"
        chmod +x "$wrapper"
        if ! OFFLINK_CACHE_DIR=$OUT/cache-$side-$s make -s -C "$OUT/work/$s" \
                OFFLINK="$wrapper" run > "$OUT/$side/$s.log" 2>&1; then
            echo "$s: the $side side's build failed (see $OUT/$side/$s.log)"
            differ=$((differ + 1))
            continue 2
        fi
        rm -rf "$OUT/$side/$s"
        mv "$OUT/work/$s/build" "$OUT/$side/$s"
    done
    for f in $(cd "$OUT/before/$s" && find . -type f | sort); do
        if cmp -s "$OUT/before/$s/$f" "$OUT/after/$s/$f"; then
            same=$((same + 1))
        else
            echo "differs: $s/${f#./}"
            differ=$((differ + 1))
        fi
    done
done
echo "$same files the same, $differ differ or failed (outputs in $OUT)"
[ "$differ" = 0 ]
