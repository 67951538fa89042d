"""Write benchmark tables of N symbols with build_table (the writer the linker uses).

    python benchmarks/lookup/gen.py OUT_DIR N [N ...]     -> OUT_DIR/table-N.bin

Rows look like a real module's: mostly functions (size 1) and some variables (8 B .. 4 KiB),
laid out one after another with alignment gaps; names are C++-like and unrelated to address
order, so the name order and the address order differ as they do in a real binary. Fixed seed:
the same N always gives the same bytes. An existing file is kept.
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from offlink.formats.table import ImageSpec, RowSpec, build_table  # noqa: E402

WORDS = ["vec", "add", "mul", "kernel", "reduce", "scan", "grid", "tile", "halo", "flux",
         "mesh", "solve", "norm", "dot", "axpy", "gemm", "fft", "sort", "hist", "state"]


def rows(n: int, seed: int = 1) -> list[RowSpec]:
    rnd = random.Random(seed)
    out, address = [], 0x1000
    for i in range(n):
        name = f"_ZN{rnd.choice(WORDS)}{rnd.choice(WORDS)}{i:x}{rnd.choice(WORDS)}Ev"
        if rnd.random() < 0.3:
            size = rnd.choice([8, 16, 64, 256, 1024, 4096])
            out.append(RowSpec(name, address, size, "variable"))
        else:
            size = rnd.randrange(16, 400)  # a function's code extent; the row says size 1
            out.append(RowSpec(name, address, 1, "function"))
        address = (address + size + 15) & ~15
    return out


def main(argv: list[str]) -> None:
    out_dir = Path(argv[0])
    out_dir.mkdir(parents=True, exist_ok=True)
    for n in map(int, argv[1:]):
        path = out_dir / f"table-{n}.bin"
        if not path.exists():
            image = ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"\x7fELF" + bytes(4092))
            path.write_bytes(build_table([image], rows(n)))
        print(path)


if __name__ == "__main__":
    main(sys.argv[1:])
