"""A bounded libFuzzer run (60 s, ASan + UBSan) over the C table core: no finding allowed.

Needs clang with libFuzzer (Debian: `apt-get install clang libclang-rt-14-dev`); skipped with the
reason when it is missing, a failure under CI=true (.ci/run installs it). tests/fuzz/run.sh is
the same run by hand, for any length.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

from conftest import need_tool

FUZZ = Path(__file__).resolve().parent / "fuzz"
SECONDS = int(os.environ.get("OFFLINK_FUZZ_SECONDS", "60"))


def _libfuzzer_clang(tmp_path: Path) -> str | None:
    clang = os.environ.get("CLANG") or shutil.which("clang")
    if clang is None:
        return None
    probe = tmp_path / "probe.c"
    probe.write_text("#include <stdint.h>\n#include <stddef.h>\n"
                     "int LLVMFuzzerTestOneInput(const uint8_t *d, size_t n) { return 0; }\n")
    ok = subprocess.run([clang, "-fsanitize=fuzzer,address,undefined", str(probe), "-o",
                         str(tmp_path / "probe")], capture_output=True).returncode == 0
    return clang if ok else None


def test_fuzz_table_core(tmp_path):
    clang = _libfuzzer_clang(tmp_path)
    need_tool(clang, "clang with libFuzzer is not installed (apt-get install clang "
              "libclang-rt-14-dev)")
    env = dict(os.environ, CLANG=clang, FUZZ_BUILD_DIR=str(tmp_path / "build"))
    proc = subprocess.run(["bash", str(FUZZ / "run.sh"), str(SECONDS)], env=env,
                          capture_output=True, text=True, timeout=SECONDS + 300)
    assert proc.returncode == 0, f"fuzzer finding:\n{proc.stderr[-6000:]}"
    assert "Done" in proc.stderr and "runs in" in proc.stderr
