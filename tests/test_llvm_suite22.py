"""LLVM 22.1.8's own offload tests (offload/test, fetched like 19's: tests/llvm_offload/
fetch.sh .ci/llvm-22-src 22), each built with clang-22 and run twice on libomptarget 22's
x86_64 plugin: linked by clang-22 and by `offlink link clang-22 ...`
(run_llvm_tests.py --release 22). The same rules as tests/test_llvm_suite.py, with its own
list (tests/llvm_offload/exclusions22.txt).

CI runs the fixed subset tests/llvm_offload/ci22.txt (the whole folder is ~30 min on 2 cores;
CI's budget is 60 min for everything); OFFLINK_LLVM22_ALL=1 runs every test, as does
`python tests/llvm_offload/run_llvm_tests.py .ci/llvm-22-src/offload/test --release 22`.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import warnings
from pathlib import Path

from conftest import ROOT, need_tool

HERE = Path(__file__).resolve().parent / "llvm_offload"
TESTS = ROOT / ".ci" / "llvm-22-src" / "offload" / "test"
EXCLUSIONS = HERE / "exclusions22.txt"
SUBSET = HERE / "ci22.txt"
FEATURE_REASONS = ("REQUIRES:", "UNSUPPORTED:", "XFAIL:")


def _suite():
    """A module instance of its own, configured for 22 (tests/test_llvm_suite.py keeps 19's)."""
    spec = importlib.util.spec_from_file_location("run_llvm_tests_22",
                                                  HERE / "run_llvm_tests.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.configure(22)
    return module


def _listed(path: Path) -> dict[str, str]:
    out = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, reason = line.partition(" ")
            out[name] = reason.strip()
    return out


def test_the_listed_reasons_are_known_kinds():
    kinds = (*FEATURE_REASONS, "clang fails:", "offlink differs:")
    assert [n for n, r in _listed(EXCLUSIONS).items() if not r.startswith(kinds)] == []
    assert all(not r for r in _listed(SUBSET).values())


def test_llvm22_offload_tests_pass_with_offlink_where_they_pass_with_clang22(offlink):
    need_tool(TESTS.is_dir(), f"LLVM 22's offload tests are not in {TESTS} "
              f"(tests/llvm_offload/fetch.sh .ci/llvm-22-src 22 unpacks them; .ci/run does)")
    suite = _suite()
    need_tool(shutil.which(suite.CLANG) and Path(suite.LLVM_LIB, "libomptarget.so").exists()
              and (ROOT / ".ci" / "libomp-22-dev" / "include" / "omp.h").exists(),
              "clang-22, liboffload-22-dev or LLVM 22's omp.h missing (.ci/run)")
    listed = _listed(EXCLUSIONS)
    every = suite.find_tests(str(TESTS))
    assert sorted(set(listed) - set(every)) == [], "listed tests that are no longer there"
    subset = sorted(_listed(SUBSET))
    assert sorted(set(subset) - set(every)) == [], "ci22.txt names tests that are not there"
    names = every if os.environ.get("OFFLINK_LLVM22_ALL") == "1" else subset
    for name in every:  # the features, checked for every test without a run
        why = suite.why_not_run((TESTS / name).read_text(errors="replace"))
        reason = listed.get(name, "")
        if why or reason.startswith(FEATURE_REASONS):
            assert why and reason.startswith(why), (name, why, reason)
    names = [n for n in names if not suite.why_not_run((TESTS / n).read_text(errors="replace"))]
    results = suite.run_suite(str(TESTS), names, offlink, len(os.sched_getaffinity(0)))
    ran = {n: (r["clang"][0], r["offlink"][0]) for n, r in results.items()
           if r["clang"][0] != "excluded"}
    unexpected, stale = [], []
    for name, outcome in ran.items():
        reason = listed.get(name, "")
        if reason.startswith("clang fails:"):
            stale += [name] if outcome[0] == "pass" else []
            ok = outcome[0] == "fail" or outcome == ("pass", "pass")
        elif reason.startswith("offlink differs:"):
            ok = outcome == ("pass", "fail")
        else:
            ok = outcome == ("pass", "pass")
        if not ok:
            unexpected.append(suite.line(name, results[name]))
    assert unexpected == [], "\n".join(unexpected)
    if stale:
        warnings.warn(f"listed as failing with clang-22's link, but passed both ways: {stale}",
                      stacklevel=1)
    both = sum(o == ("pass", "pass") for o in ran.values())
    assert both >= len(ran) - sum(listed.get(n, "").startswith("clang fails:") for n in ran)
    assert both >= 30 or len(names) < 30, both
