#!/bin/sh
# offlink's own stages on relinks of clang-22's default OpenMP objects (30 CUs of bench.py's
# program, -fopenmp-targets=x86_64-pc-linux-gnu): nothing changed, and one CU changed (cu0.c
# given another constant and compiled before each link, not timed). For each offlink given as
# NAME=DIR (DIR holds an offlink/ package: a checkout, or `git archive` of a commit with its
# built _ctable.abi3.so copied in; run by this checkout's .venv python) it prints the medians
# of `--timings` stage times and of offlink's own CPU (its process alone, no child), then
# `perf stat -r 10 -e task-clock` of the whole link beside clang-22's own.
#
#   benchmarks/clang/relink_stages.sh WORK NAME=DIR [NAME=DIR...]
set -eu
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
work=$1
shift
mkdir -p "$work"
cd "$work"
unset PYTHONDONTWRITEBYTECODE
FLAGS="-fopenmp -fopenmp-targets=x86_64-pc-linux-gnu"
LIBS="-L/usr/lib/llvm-22/lib -L/usr/lib/llvm-19/lib"
objs=$(python3 -c "import sys; sys.path.insert(0, '$here'); import bench; from pathlib import \
Path; print(' '.join(s[:-2] + '.o' for s in bench.write_program(Path('.'), 30)))")
for o in $objs; do clang-22 -O2 $FLAGS -c "${o%.o}.c" -o "$o" & done
wait
cat > selfcpu.py <<'EOF'
import atexit, resource, sys
def said():
    r = resource.getrusage(resource.RUSAGE_SELF)
    print(f"self-cpu {1e3 * (r.ru_utime + r.ru_stime):.1f}", file=sys.stderr)
atexit.register(said)
sys.argv = ["offlink", *sys.argv[1:]]
from offlink.cli import main
sys.exit(main())
EOF
cat > change.sh <<EOF
#!/bin/sh
# cu0.c with another constant each time (as bench.py changes it), compiled
cd "$work"
n=\$(cat counter 2>/dev/null || echo 1); n=\$((n + 1)); echo \$n > counter
python3 -c "import sys; sys.path.insert(0, '$here'); import bench; \
open('cu0.c', 'w').write(bench.cu_source(0, \$n))"
clang-22 -O2 $FLAGS -c cu0.c -o cu0.o
EOF
cat > link.sh <<EOF
#!/bin/sh
# link.sh clang | NAME DIR [offlink link options]
cd "$work"
[ "\$1" = clang ] && exec clang-22 $FLAGS $LIBS $objs -lm -o prog.clang
name=\$1 dir=\$2
shift 2
run="-m offlink"
[ -n "\${SELFCPU:-}" ] && run="$work/selfcpu.py"
OFFLINK_CACHE_DIR="$work/cache-\$name" PYTHONPATH="\$dir" exec "$root/.venv/bin/python" \$run \
  link "\$@" clang-22 $FLAGS $LIBS $objs -lm -o "prog.\$name"
EOF
chmod +x change.sh link.sh
sleep 2.1  # the objects settled: the second link records them (link/relink.py)
medians() {  # label runs change(0/1) link.sh words...
  label=$1 runs=$2 change=$3
  shift 3
  for _ in $(seq "$runs"); do
    [ "$change" = 1 ] && ./change.sh
    SELFCPU=1 ./link.sh "$@" --timings 2>&1 | grep -E "timing \(ms\)|self-cpu"
  done | python3 -c "
import re, statistics, sys
lines = sys.stdin.read().splitlines()
rows = [dict((k.split('[')[0], float(v)) for k, v in re.findall(r'(\S+) ([0-9.]+)',
        ln.split('(ms):')[1])) for ln in lines if '(ms):' in ln]
cpu = [float(ln.split()[1]) for ln in lines if ln.startswith('self-cpu')]
print('$label:', '  '.join(f'{k} {statistics.median(r[k] for r in rows):.1f}' for k in rows[0]),
      f'| own CPU {statistics.median(cpu):.1f}')"
}
for spec in "$@"; do  # cold, then the record and the image written
  for _ in 1 2 3; do ./link.sh "${spec%%=*}" "${spec#*=}" >/dev/null 2>&1; done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
echo "-- nothing changed, medians of 9 (ms)"
for spec in "$@"; do medians "${spec%%=*}" 9 0 "${spec%%=*}" "${spec#*=}"; done
echo "-- one CU changed, medians of 9 (ms)"
for spec in "$@"; do medians "${spec%%=*}" 9 1 "${spec%%=*}" "${spec#*=}"; done
said() {  # perf stat's lines, in one
  awk '/task-clock/ {for (i = 1; i < NF; i++) if ($i == "+-") pm = $(i + 1)
                     printf "%s ms CPU (+- %s), ", $1, pm}
       /elapsed/ {printf "%s s wall (+- %s)", $1, $3}'
}
for change in 0 1; do
  pre=""
  [ "$change" = 1 ] && pre="--pre ./change.sh"
  echo "-- perf stat -r 10 -e task-clock $pre"
  echo "clang own: $(perf stat -r 10 -e task-clock $pre ./link.sh clang 2>&1 | said)"
  for spec in "$@"; do
    echo "${spec%%=*}: $(perf stat -r 10 -e task-clock $pre ./link.sh "${spec%%=*}" \
      "${spec#*=}" 2>&1 | said)"
  done
done
echo "load average $(cut -d' ' -f1-3 /proc/loadavg)"
