"""Write the kept seed corpus for fuzz_table.c: small valid tables from build_table.

Run from the repository root: python tests/fuzz/make_corpus.py (rewrites tests/fuzz/corpus).
"""

from __future__ import annotations

from pathlib import Path

from offlink.formats.table import ImageSpec, RowSpec, build_table

HERE = Path(__file__).resolve().parent


def seeds() -> dict[str, bytes]:
    host = ImageSpec("x86_64-pc-linux-gnu", "shared-object", b"\x7fELF" + bytes(28))
    cubin = ImageSpec("nvptx64-nvidia-cuda", "cubin", b"cubin")
    ptx = ImageSpec("nvptx-none", "nvptx-none", b".version 7.0\n")
    rows = [RowSpec(f"f{i:02d}", 0x1000 + 16 * i, 1, "function") for i in range(12)]
    rows += [RowSpec(f"v{i:02d}", 0x4000 + 64 * i, 8 * (i + 1), "variable") for i in range(12)]
    return {
        "empty": build_table([], []),
        "one_row": build_table([host], [RowSpec("main_kernel", 0x100, 1, "function")]),
        "kinds": build_table([host, cubin, ptx], [
            RowSpec("fn", 0x10, 1, "function"), RowSpec("var", 0x20, 32, "variable"),
            RowSpec("ind", 0x40, 1, "indirect-function"), RowSpec("lnk", -0x80, 8,
                                                                 "link-variable")]),
        "prefixes": build_table([host], [
            RowSpec(n, 8 * i, 4, "variable") for i, n in enumerate(["", "a", "ab", "abc", "b"])]),
        "same_address": build_table([cubin], [
            RowSpec("alias1", 0x200, 16, "variable"), RowSpec("alias2", 0x200, 0, "variable"),
            RowSpec("alias3", 0x200, 8, "variable")]),
        "extremes": build_table([host], [
            RowSpec("lo", -(2**63), 2**64 - 1, "variable"), RowSpec("hi", 2**63 - 1, 1,
                                                                    "function"),
            RowSpec("z\u00e9ro", 0, 0, "variable")]),
        "many": build_table([host, cubin], rows),
    }


def main() -> None:
    out = HERE / "corpus"
    out.mkdir(exist_ok=True)
    for old in out.glob("*.bin"):
        old.unlink()
    for name, data in seeds().items():
        (out / f"{name}.bin").write_bytes(data)


if __name__ == "__main__":
    main()
