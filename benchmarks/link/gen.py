"""Generate a synthetic offload project: N CUs x M offered functions, plus a main that calls
one function of every CU through the offload table.

    python benchmarks/link/gen.py DIR [--cus 40] [--symbols 20] [--rev CU:N]

Every CU includes a few system headers (as real code does, so each target compile parses a
realistic amount of code) and defines M small functions and one variable. `--rev CU:N` writes
only CU number CU again with revision N (a changed constant), to simulate an edit. DIR gets a
Makefile: `make -C DIR -j OFFLINK=... objects` builds the fat objects with `offlink cc`,
`make -C DIR OFFLINK=... app` links them with `offlink link`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

HEADERS = "#include <stdio.h>\n#include <stdlib.h>\n#include <string.h>\n#include <math.h>\n"

MAKEFILE = """\
OFFLINK ?= offlink
CC ?= gcc
CFLAGS ?= -O2
CUS := $(wildcard cu*.c)
OBJS := $(CUS:.c=.o) main.o
RT_CFLAGS := $(shell $(OFFLINK) config --cflags)
RT_LIBS := $(shell $(OFFLINK) config --libs)

app: $(OBJS)
\t+$(OFFLINK) link $(CC) $(OBJS) $(RT_LIBS) -lm -o $@

objects: $(OBJS)

%.o: %.c
\t$(OFFLINK) cc $(CC) $(CFLAGS) $(RT_CFLAGS) -c $< -o $@

.PHONY: objects
"""


def cu_source(i: int, symbols: int, rev: int = 0) -> str:
    lines = [HEADERS, f"/* CU {i}, revision {rev} */", f"int cu{i:04d}_state = {i + rev};"]
    for k in range(symbols):
        lines.append(f"""\
int cu{i:04d}_f{k}(int x)
{{
  int acc = {k + rev};
  for (int j = 0; j < (x & 15); j++) {{
    switch ((x + j) % 4) {{
    case 0: acc += j * {k + 1}; break;
    case 1: acc ^= (int)strlen("cu{i}f{k}") + j; break;
    case 2: acc -= abs(x - j); break;
    default: acc += (int)sqrt((double)(j * j + {k}));
    }}
  }}
  return acc + cu{i:04d}_state;
}}""")
    return "\n".join(lines) + "\n"


def main_source(cus: int) -> str:
    decls = "".join(f"int cu{i:04d}_f0(int);\n" for i in range(cus))
    calls = "".join(f"  {{ int (*f)(int) = offlink_translate(t, (const void *)cu{i:04d}_f0); "
                    f"sum += f(7) - cu{i:04d}_f0(7); n += f != cu{i:04d}_f0; }}\n"
                    for i in range(cus))
    return f"""\
#include <stdio.h>
#include <offlink.h>
{decls}
int main(void)
{{
  const void *t = OFFLINK_TABLE;
  long sum = 0;
  int n = 0;
{calls}  printf("%d of {cus} translated, difference %ld\\n", n, sum);
  return 0;
}}
"""


def generate(root: Path, cus: int, symbols: int) -> None:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(cus):
        (root / f"cu{i:04d}.c").write_text(cu_source(i, symbols))
    (root / "main.c").write_text(main_source(cus))
    (root / "Makefile").write_text(MAKEFILE)
    (root / "shape").write_text(f"{cus} {symbols}\n")


def revise(root: Path, cu: int, rev: int) -> Path:
    symbols = int((root / "shape").read_text().split()[1])
    path = root / f"cu{cu:04d}.c"
    path.write_text(cu_source(cu, symbols, rev))
    return path


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir", type=Path)
    ap.add_argument("--cus", type=int, default=40)
    ap.add_argument("--symbols", type=int, default=20)
    ap.add_argument("--rev", help="CU:N - rewrite CU number CU at revision N")
    args = ap.parse_args()
    if args.rev:
        cu, rev = (int(x) for x in args.rev.split(":"))
        revise(args.dir, cu, rev)
    else:
        generate(args.dir, args.cus, args.symbols)


if __name__ == "__main__":
    main()
