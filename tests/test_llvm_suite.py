"""LLVM's own offload tests (every C/C++ test of LLVM 19.1.7's offload/test: offloading/,
mapping/, api/, unified_shared_memory/, ...), each built and run twice
on libomptarget's x86_64 plugin: linked by clang (clang-linker-wrapper) and by `offlink link
clang-19 ...` (tests/llvm_offload/run_llvm_tests.py). No test may pass with clang's link and
fail with offlink's. The tests are not in this repository: tests/llvm_offload/fetch.sh
unpacks them from Debian's source package into .ci/llvm-19-src (.ci/run does so).

Every test the harness does not pass both ways is in tests/llvm_offload/exclusions.txt with
its reason, and each reason is checked, so the list cannot rot: a `REQUIRES:` /
`UNSUPPORTED:` / `XFAIL:` reason is what the test's own lines say for this target; an
`offlink differs:` test still passes with clang's link and fails with offlink's; a `clang
fails:` test that passes with clang's link now is reported (a warning: ompx_3d's outcome
depends on the number of cores) and must then pass with offlink's too.
"""

from __future__ import annotations

import os
import shutil
import sys
import warnings
from pathlib import Path

from conftest import ROOT, need_tool

sys.path.insert(0, str(Path(__file__).resolve().parent / "llvm_offload"))
import run_llvm_tests as suite  # noqa: E402

TESTS = ROOT / ".ci" / "llvm-19-src" / "offload" / "test"
EXCLUSIONS = ROOT / "tests" / "llvm_offload" / "exclusions.txt"
FEATURE_REASONS = ("REQUIRES:", "UNSUPPORTED:", "XFAIL:")
# Fewer tests than this passing both ways means the run itself broke (2026-11: 132 of 137 run).
FLOOR = 120


def exclusions() -> dict[str, str]:
    """name -> reason, from the checked-in list (`NAME  REASON`, `#` comments)."""
    out = {}
    for line in EXCLUSIONS.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            name, reason = line.split(None, 1)
            out[name] = reason.strip()
    return out


def test_the_listed_reasons_are_known_kinds():
    kinds = (*FEATURE_REASONS, "clang fails:", "offlink differs:")
    assert [n for n, r in exclusions().items() if not r.startswith(kinds)] == []


def test_llvm_offload_tests_pass_with_offlink_where_they_pass_with_clang(offlink):
    need_tool(TESTS.is_dir(), f"LLVM's offload tests are not in {TESTS} "
              f"(tests/llvm_offload/fetch.sh unpacks them; .ci/run does)")
    need_tool(shutil.which(suite.CLANG) and Path(suite.LLVM_LIB, "libomptarget.so").exists(),
              "clang-19 or libomptarget missing (apt-get install clang-19 libomp-19-dev)")
    listed = exclusions()
    names = suite.find_tests(str(TESTS))
    assert sorted(set(listed) - set(names)) == [], "listed tests that are no longer there"

    # What the tests' own REQUIRES/UNSUPPORTED/XFAIL lines exclude, checked without a run.
    for name in names:
        why = suite.why_not_run((TESTS / name).read_text(errors="replace"))
        reason = listed.get(name, "")
        if why or reason.startswith(FEATURE_REASONS):
            assert why and reason.startswith(why), (name, why, reason)

    jobs = len(os.sched_getaffinity(0))
    results = suite.run_suite(str(TESTS), names, offlink, jobs)
    ran = {n: (r["clang"][0], r["offlink"][0]) for n, r in results.items()
           if r["clang"][0] != "excluded"}
    report = "\n".join(suite.line(n, results[n]) for n in ran)
    unexpected, stale = [], []
    for name, outcome in ran.items():
        reason = listed.get(name, "")
        if reason.startswith("clang fails:"):
            if outcome[0] == "pass":
                stale.append(name)
            expected_ok = outcome[0] == "fail" or outcome == ("pass", "pass")
        elif reason.startswith("offlink differs:"):
            expected_ok = outcome == ("pass", "fail")
        else:
            expected_ok = outcome == ("pass", "pass")
        if not expected_ok:
            unexpected.append(suite.line(name, results[name]))
    assert unexpected == [], "\n".join(unexpected)
    if stale:
        warnings.warn(f"listed as failing with clang's link, but passed both ways: {stale}",
                      stacklevel=1)
    both = sum(o == ("pass", "pass") for o in ran.values())
    assert both >= FLOOR, report
    assert not any(o == ("pass", "fail") and not listed.get(n, "").startswith("offlink differs")
                   for n, o in ran.items())
