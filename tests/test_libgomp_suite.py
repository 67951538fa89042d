"""Each GCC release's own libgomp test suite (libgomp.c, libgomp.c-c++-common, libgomp.c++,
libgomp.fortran, libgomp.oacc-*), a fixed subset drawn from every directory
(tests/libgomp_suite/subset.txt): each program built by GCC's own offload link and by
`offlink link` with no offlink option, run (host fallback: no GPU here) and compared, exit
status, output and libgomp registration (tests/libgomp_suite/run_libgomp_tests.py). The whole
suite is `tests/libgomp_suite/run_libgomp_tests.py -j 2` (about half an hour on 2 cores; its
counts are in tests/libgomp_suite/README.md). The tests are not in this repository:
tests/libgomp_suite/fetch.sh unpacks them from Debian's gcc-12 source package into
.ci/gcc-12-src (.ci/run does so). GCC 13-16's suites run the same way inside the chroot that
ships each release (tests/chroots), from .ci/gcc-N-src, with their own fixed subsets
(tests/libgomp_suite/subset-N.txt).
"""

from __future__ import annotations

import concurrent.futures
import sys
from pathlib import Path

import pytest
from conftest import ROOT, in_chroot, need_tool
from test_gcc_offload import HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD

sys.path.insert(0, str(Path(__file__).resolve().parent / "libgomp_suite"))
import run_libgomp_tests as suite  # noqa: E402

SUBSET = ROOT / "tests" / "libgomp_suite" / "subset.txt"
PER_DIRECTORY = 4  # at least this many of each directory's tests (libgomp.oacc-c has 4)


def test_the_subset_draws_from_every_directory():
    names = suite.read_list(SUBSET)
    assert len(names) == len(set(names))
    for d in suite.DIRS:
        assert sum(n.startswith(d + "/") for n in names) >= PER_DIRECTORY, d


def test_libgomp_tests_pass_with_offlinks_link_as_with_gccs(offlink, tmp_path):
    need_tool(suite.SUITE.is_dir(), f"GCC's libgomp tests are not in {suite.SUITE} "
              f"(tests/libgomp_suite/fetch.sh unpacks them; .ci/run does)")
    need_tool(HAVE_GCC_OFFLOAD, NO_GCC_OFFLOAD)
    suite.OFFLINK = offlink
    shim = suite.build_shim(tmp_path)
    names = suite.read_list(SUBSET)
    with concurrent.futures.ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda n: suite.run_test(n, shim), names))
    # The subset lists tests that passed both ways in a whole run: each must again.
    assert [(n, r) for n, r in zip(names, results) if r[0] != "same"] == []


LATER = (13, 14, 15, 16)


@pytest.mark.parametrize("release", LATER)
def test_each_later_subset_draws_from_every_directory(release):
    names = suite.read_list(ROOT / "tests" / "libgomp_suite" / f"subset-{release}.txt")
    assert len(names) == len(set(names))
    for d in suite.DIRS:
        assert sum(n.startswith(d + "/") for n in names) >= PER_DIRECTORY, (release, d)


@pytest.mark.parametrize("release", LATER)
def test_later_libgomp_tests_pass_with_offlinks_link_as_with_gccs(release):
    """GCC `release`'s subset, run by the harness inside the release's chroot (its gcc-N, its
    Python, this checkout's offlink): every test passes both ways, as in the whole run."""
    folder = ROOT / ".ci" / f"gcc-{release}-src" / "libgomp" / "testsuite"
    need_tool(folder.is_dir(), f"GCC {release}'s libgomp tests are not in {folder} "
              f"(tests/libgomp_suite/fetch.sh .ci/gcc-{release}-src {release}; .ci/run does)")
    subset = ROOT / "tests" / "libgomp_suite" / f"subset-{release}.txt"
    proc = in_chroot(suite.CHROOT[release],
                     ["python3", str(ROOT / "tests" / "libgomp_suite" / "run_libgomp_tests.py"),
                      "--release", str(release), "-j", "2", "--subset", str(subset)])
    lines = proc.stdout.splitlines()
    assert [ln for ln in lines if not ln.startswith("same")][:-1] == [], proc.stderr[-2000:]
    assert proc.returncode == 0 and lines[-1].startswith(
        f"passed both ways (same exit, output, registration): {len(suite.read_list(subset))};")
