# Sourced by the before/after benchmarks (before_after.sh, health/cost.sh), from the checkout's
# root, with BEFORE, AFTER, PY and OUT set: each revision's offlink/ exported (git archive) into
# $OUT/before and $OUT/after with this checkout's built _ctable module and runtime library
# copied in and byte-compiled, so both sides start up the same way as `python -m offlink`;
# OLD and NEW are the two commands. TMPDIR is $OUT/tmp (an empty folder).
export TMPDIR=$OUT/tmp
mkdir -p "$TMPDIR"
for side in before after; do
    rev=$([ $side = before ] && echo "$BEFORE" || echo "$AFTER")
    mkdir -p "$OUT/$side"
    git archive "$rev" offlink | tar -x -C "$OUT/$side"
    cp offlink/_ctable*.so "$OUT/$side/offlink/"
    cp -r offlink/runtime/lib "$OUT/$side/offlink/runtime/"
    "$PY" -m compileall -q "$OUT/$side"
done
OLD="env PYTHONPATH=$OUT/before $PY -m offlink"
NEW="env PYTHONPATH=$OUT/after $PY -m offlink"
