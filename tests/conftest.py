"""Shared test helpers: the offlink command, building and running samples."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path
from stat import S_ISREG

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLES = ROOT / "samples"


def offlink_command(tmp_dir: Path) -> str:
    """The installed `offlink` script beside this Python, else a wrapper running `-m offlink`."""
    script = Path(sys.executable).parent / "offlink"
    if script.exists():
        return str(script)
    wrapper = tmp_dir / "offlink"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{ROOT}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec "{sys.executable}" -m offlink "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


def in_ci() -> bool:
    """Whether this is the CI run (.ci/run on a fresh machine, with every optional toolchain
    installed), where a missing tool is a broken set-up, not a reason to skip."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


CHROOTS = ROOT / ".ci" / "chroots"


def chroot(name: str) -> Path:
    """The chroot `tests/chroots/make.sh` built for `name` (trixie: GCC 14; sid: GCC 15, 16 and
    clang-23), or skip (fail under CI=true) where it is not there."""
    folder = CHROOTS / name
    return need_tool(folder if (folder / ".offlink-ready").exists() else None,
                     f"the {name} chroot is not built (tests/chroots/make.sh .ci/chroots {name})")


def in_chroot(name: str, command: list[str], cwd: Path | str | None = None,
              **kwargs) -> subprocess.CompletedProcess:
    """`command` run inside chroot `name` (tests/chroots/run.sh: the checkout and /tmp at the
    same paths, `offlink` on PATH runs this checkout with the chroot's Python)."""
    kwargs.setdefault("capture_output", True)
    kwargs.setdefault("text", True)
    return subprocess.run([str(ROOT / "tests" / "chroots" / "run.sh"), str(chroot(name)),
                           *command], cwd=cwd, **kwargs)


def need_tool(found, reason: str):
    """`found` (a path, a command, True) when it is there; else skip the test with the reason,
    or fail it under CI=true: .ci/run installs every tool a test asks for here, so a skip
    there would count a test that never ran as a pass."""
    if _running is not None:
        _check_marked(_running, reason)
    if found:
        return found
    if in_ci():
        pytest.fail(f"{reason} (CI=true: .ci/run is meant to install it)", pytrace=False)
    pytest.skip(reason)


def needs_tool(missing: bool, reason: str) -> pytest.MarkDecorator:
    """A test marker with need_tool's rule: skip when the tool is missing, fail under CI=true.
    Checked before the test's fixtures are set up (pytest_runtest_setup below)."""
    return pytest.mark.needs_tool(missing=missing, reason=reason)


def pytest_configure(config) -> None:
    config.addinivalue_line("markers", "needs_tool(missing, reason): skip when a tool is "
                            "missing, fail under CI=true (tests/conftest.py: need_tool)")
    if config.getoption("--no-toolchains", False):  # before collection: modules probe PATH
        folder = Path(tempfile.mkdtemp(prefix="offlink-no-toolchains-"))
        config.add_cleanup(lambda: shutil.rmtree(folder, ignore_errors=True))
        os.environ["PATH"] = shadow_toolchains(folder, os.environ.get("PATH", ""))
    if not hasattr(config, "workerinput"):  # once, in the process that ends last
        started = time.time() - 1
        config.add_cleanup(lambda: remove_plugin_images(started))


# libomptarget's x86_64 plugin writes each image it loads to a file it never removes
# (LLVM 22: $TMPDIR/tmpfile-XXXXXX.tmp; LLVM 19: /tmp/tmpfile_XXXXXX): the suite's programs
# would leave thousands behind on every run.
PLUGIN_IMAGE = re.compile(r"tmpfile(-[A-Za-z0-9]{6}\.tmp|_[A-Za-z0-9]{6})")


def remove_plugin_images(since: float) -> None:
    """Remove the plugin's image files of this user made since `since` (ELF files only)."""
    for folder in {tempfile.gettempdir(), "/tmp"}:
        try:
            names = [n for n in os.listdir(folder) if PLUGIN_IMAGE.fullmatch(n)]
        except OSError:
            continue
        for name in names:
            path = os.path.join(folder, name)
            try:
                st = os.lstat(path)
                if st.st_uid != os.getuid() or st.st_mtime < since or not S_ISREG(st.st_mode):
                    continue
                with open(path, "rb") as f:
                    if f.read(4) == b"\x7fELF":
                        os.unlink(path)
            except OSError:
                pass


def pytest_runtest_setup(item) -> None:
    for mark in item.iter_markers("needs_tool"):
        if mark.kwargs["missing"]:
            need_tool(None, mark.kwargs["reason"])


# The tiers (tests/README.md). A test is marked by what it needs beyond Python and the package
# `make venv` builds; one that needs nothing more is a unit test, marked `unit` here, and
# `make test-fast` runs those alone. The markers are registered in pyproject.toml.
TOOLCHAIN_MARKERS = ("gcc_offload", "clang19", "clang22", "flang", "cuda", "other_tools", "suite",
                     "real_projects", "chroots")
# `host`: the host's compilers, binutils and make alone; `slow`: nothing more, but seconds
NEED_MARKERS = ("host", "slow", *TOOLCHAIN_MARKERS)

# A need_tool, needs_tool or skipif reason names its tool: the markers it means (every match).
REASON_MARKERS = [
    (r"chroot|gcc-1[3-6]|GCC 1[3-6]|clang-23|LLVM 23", "chroots"),
    (r"offload tests are not|libgomp tests are not", "suite"),
    (r"flang", "flang"),
    (r"clang-22|LLVM 22|liboffload-22", "clang22"),
    (r"clang-19|clang-tools-19|llvm-19|llvm-lto2|libomptarget|ziglang", "clang19"),
    (r"CUDA|nvcc|ptxas|nvlink", "cuda"),
    (r"gcc-12-offload|nvptx-tools|nvptx-none|GCC's nvptx|gfortran", "gcc_offload"),
    (r"cmake|meson|pkg-config|distcc|redis|sccache|libFuzzer", "other_tools"),
    (r"^gcc\b(?!-)|g\+\+|ld\.gold|C compiler|^clang missing", "host"),
]


def reason_markers(reason: str) -> set[str]:
    return {marker for pattern, marker in REASON_MARKERS if re.search(pattern, reason)}


def markers_of(item) -> set[str]:
    """What a collected test needs: its module's or its own entry in NEEDS (below), its
    fixtures' entries there, and what its needs_tool and skipif marks name; `host` is left out
    where a toolchain is named (every toolchain test needs the host's tools too)."""
    default, tests = NEEDS.get(item.path.name, ((), {}))
    name = getattr(item, "originalname", item.name)
    markers = set(tests.get(item.name, tests.get(name, default)))
    for fixture in getattr(item, "fixturenames", ()):
        markers |= set(tests.get(fixture, ()))
    for mark in [*item.iter_markers("needs_tool"), *item.iter_markers("skipif")]:
        markers |= reason_markers(mark.kwargs.get("reason", ""))
    if not markers and item.get_closest_marker("needs_tool"):
        raise pytest.UsageError(f"{item.nodeid} has a needs_tool mark whose reason names no tool "
                                f"of REASON_MARKERS: add the test to NEEDS in tests/conftest.py")
    if markers & set(TOOLCHAIN_MARKERS):
        markers.discard("host")
    return markers


# What the tests of each module need (`make test-fast`, tests/README.md), beside what their
# needs_tool and skipif marks name: module -> (markers of its tests, {test: its own markers,
# fixture: markers added to every test that uses it}); a test is named by its function, or with
# its parameters where they differ; () is a unit test. A module not here holds unit tests, and
# tests marked by needs_tool alone.
NEEDS: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "test_build_path.py": ((), {
        "test_file_prefix_map_on_the_link_line_names_the_inputs": ("host",),
        "test_the_same_objects_linked_in_two_folders_give_the_same_bytes[clang]": ("clang19",),
        "test_the_same_objects_linked_in_two_folders_give_the_same_bytes[gcc]": ("gcc_offload",),
        "test_the_same_objects_linked_in_two_folders_give_the_same_bytes[offlink]": ("host",),
    }),
    "test_build_systems.py": (("other_tools",), {
        "test_prebuilt_runtime_needs_no_compiler": (),
        "test_stale_or_damaged_prebuilt_runtime_is_not_used": ("host",),
        "test_unreachable_jobserver_note_is_said_once_and_only_when_jobs_wait": (),
    }),
    "test_cache.py": (("host",), {
        "test_a_changed_device_runtime_command_or_offlink_code_misses_the_cache": (),
        "test_a_native_target_compile_is_keyed_by_what_native_is_on_this_cpu": (),
        "test_cache_folder_of_another_user_is_refused": (),
        "test_compiler_identity_follows_the_compiler": (),
        "test_compiler_version_is_probed_once_across_links": (),
        "test_deferred_code_must_keep_its_recorded_sha256": (),
        "test_entries_put_later_are_written_with_their_keys_made_then": (),
        "test_lazy_payload_keeps_the_bounds_checks_and_a_stable_key": (),
        "test_normalise_replaces_temporary_paths_in_and_as_words": (),
        "test_object_key_covers_what_the_compile_depends_on": (),
        "test_a_warm_entry_is_read_without_json": (),
        "test_entry_metadata_is_read_as_json_loads_reads_it": (),
        "test_parse_size": (),
        "test_remembered_tool_changed_in_place_or_replaced_is_noticed": (),
        "test_runtime_library_key_follows_a_same_size_rewrite_of_the_compiler": (),
        "test_same_size_rewrite_within_one_tick_is_noticed": (),
        "test_size_limit_evicts_least_recently_used": (),
        "test_temporary_files_never_follow_a_planted_name": (),
        "test_trim_scans_only_when_the_noted_total_nears_the_limit_or_is_old": (),
    }),
    "test_cc_cache.py": (("host",), {
        "test_native_options": (),
        "test_prerequisites_of_a_depfile": (),
        "test_the_command_a_driver_would_run": (),
        "test_the_files_preprocessed_code_came_from": (),
        "test_the_host_preprocessing_is_the_target_one_without_its_defines": (),
        "test_which_compiles_are_cached": (),
    }),
    "test_cli.py": (("host",), {
        "test_cc_that_cannot_exec_its_compiler_says_so": (),
        "test_command_process_runs_without_the_cycle_collector": (),
        "test_help_in_one_plain_style_everywhere": (),
        "test_usage_errors_are_one_line": (),
        "test_version_everywhere": (),
        "test_which_finds_tools_as_shutil_does": (),
    }),
    "test_clang22_gpu.py": (("clang22", "cuda"), {}),
    "test_clang23.py": (("chroots",), {}),
    "test_distributed.py": (("other_tools",), {}),
    "test_errors.py": (("host",), {
        "test_a_tool_run_for_its_output_says_what_it_printed_and_how_it_ended": (),
        "test_not_an_elf_file": (),
        "test_unknown_offlink_option": (),
    }),
    "test_fuzz.py": (("other_tools",), {}),
    "test_gcc_languages.py": (("gcc_offload",), {}),
    "test_gcc_later.py": (("chroots",), {
        "test_requires_masks_combine_as_lto1_combines_them": (),
        "test_mkoffloads_own_ptx_files_byte_for_byte": (),
        "test_c_source_in_each_releases_layout": (),
    }),
    "test_gcc_offload.py": ((), {"sample": ("gcc_offload",)}),
    "test_gpu_bundle.py": (("clang19", "cuda", "gcc_offload"), {}),
    "test_host_image.py": (("host",), {}),
    "test_inspect.py": (("host",), {
        "clang_built": ("clang19",),
        "gcc_built": ("gcc_offload",),
        "test_every_damaged_image_is_named": (),
        "test_origins_are_the_json_text_json_dumps_writes": (),
        "test_origins_round_trip_and_every_truncation_is_a_format_error": (),
    }),
    "test_inspect_toolchains.py": (("gcc_offload",), {
        "test_addresses_are_hex_as_maps_and_nm_print_them": (),
        "test_ambiguous_or_wrong_numbers_are_refused": (),
        "test_clang_explain_names_the_missing_runtime_and_offload_disabled": ("clang19",),
        "test_clang_function_pointer_suggests_declare_target_indirect": ("clang19",),
        "test_clangs_own_link_entries_and_images_match_llvm_objdump": ("clang19",),
        "test_nvcc_link_shows_its_fatbin_and_kernels": ("cuda",),
    }),
    "test_inspect_edges.py": (("host",), {
        "test_gomp_register_wins_over_the_environment": ("gcc_offload",),
        "test_docs_cite_only_files_the_repository_has": (),
        "test_the_meson_recipe_is_the_samples_own": (),
    }),
    "test_inspect_matrix.py": (("gcc_offload",), {
        **{f"{t}[{row}]": needs for row, needs in (
            ("clang19-x86_64", ("clang19",)), ("clang19-sm_80", ("clang19", "cuda")),
            ("clang19-gfx90a", ("clang19",)), ("nvcc-sm_80", ("cuda",)),
            ("offlink-own", ("host",)))
           for t in ("test_both_links_give_the_same_facts_in_one_schema",
                     "test_symbol_answers_each_name_on_both_links",
                     "test_address_of_the_kernel_entry_names_it",
                     "test_explain_names_its_evidence_and_agrees_with_inspect",
                     "test_extract_writes_every_image_inspect_lists")},
        **{f"{t}[gcc{v}-{kind}]": ("chroots",) for v in ("13", "14", "15", "16")
           for kind in ("c", "c++", "fortran", "dso", "two-targets", "indirect")
           for t in ("test_both_links_give_the_same_facts_in_one_schema",
                     "test_symbol_answers_each_name_on_both_links",
                     "test_address_of_the_kernel_entry_names_it",
                     "test_explain_names_its_evidence_and_agrees_with_inspect",
                     "test_extract_writes_every_image_inspect_lists")},
        "test_gcc14_indirect_function_is_an_entry": ("chroots",),
        **{f"{t}[{row}]": needs for row, needs in (
            ("clang22-x86_64", ("clang22",)), ("clang22-sm_80", ("clang22", "cuda")),
            ("clang22-sm_80-lto", ("clang22", "cuda")), ("clang22-gfx90a", ("clang22",)),
            ("clang22-gfx90a-lto", ("clang22",)), ("clang23-x86_64", ("chroots",)))
           for t in ("test_both_links_give_the_same_facts_in_one_schema",
                     "test_symbol_answers_each_name_on_both_links",
                     "test_address_of_the_kernel_entry_names_it",
                     "test_explain_names_its_evidence_and_agrees_with_inspect",
                     "test_extract_writes_every_image_inspect_lists")},
    }),
    "test_jobserver.py": ((), {
        "test_failed_compile_gives_tokens_back": ("host",),
        "test_fifo_jobserver_limits_and_returns_tokens": ("host",),
        "test_make_jobserver_limits_target_compiles": ("host",),
        "test_nothing_extra_when_not_a_terminal": ("host",),
        "test_progress_display_on_a_terminal": ("host",),
        "test_signals_give_tokens_back_and_stop_compiles": ("host",),
        "test_timings_verbose_and_env": ("host",),
    }),
    "test_libgomp_suite.py": ((), {
        "test_libgomp_tests_pass_with_offlinks_link_as_with_gccs": ("gcc_offload", "suite"),
        "test_later_libgomp_tests_pass_with_offlinks_link_as_with_gccs": ("chroots", "suite"),
    }),
    "test_link.py": (("host",), {
        "test_compiles_sweep_a_large_tmpdir_now_and_then_links_always": (),
        "test_output_installed_from_another_file_system_through_o_tmpfile": (),
        "test_output_installed_from_another_file_system_without_o_tmpfile": (),
        "test_staged_file_of_a_dead_link_is_swept_by_the_next_link_of_that_output": (),
        "test_work_folder_sweeps_every_kind_in_one_listing": (),
        "test_work_folder_taken_by_another_sweep_before_its_lock": (),
    }),
    "test_llvm_suite.py": ((), {
        "test_llvm_offload_tests_pass_with_offlink_where_they_pass_with_clang":
            ("clang19", "suite"),
    }),
    "test_llvm_suite22.py": ((), {
        "test_llvm22_offload_tests_pass_with_offlink_where_they_pass_with_clang22":
            ("clang22", "suite"),
    }),
    "test_mixed.py": (("gcc_offload",), {
        "test_offlink_and_clang_offload_objects_link_and_run_together": ("clang19",),
    }),
    "test_narrow.py": (("host",), {
        "test_names_and_patterns_select_as_a_version_script_does": (),
    }),
    "test_packaging.py": ((), {
        "test_wheel_carries_every_module_and_data_file": ("slow",),
        "test_wheel_build_prints_no_warnings": ("host",),
        "test_wheel_carries_licence_extension_and_bounded_dependencies": ("host",),
        "test_wheel_carries_the_prebuilt_runtime": ("host",),
    }),
    "test_readme.py": ((), {
        "test_every_sh_block_runs_as_written": ("clang19", "cuda", "gcc_offload", "other_tools"),
        "test_worked_example_runs_as_written": ("host",),
    }),
    "test_real_projects.py": (("real_projects",), {}),
    "test_runtime.py": (("host",), {
        "test_build_failure_is_a_tool_error": (),
        "test_cache_dir": (),
        "test_the_registry_has_no_data_race": ("clang19",),
    }),
    "test_samples.py": (("host",), {}),
    "test_toolchain_offload.py": ((), {
        "test_asked_for_it_offlink_adds_its_payload_too": ("gcc_offload",),
        "test_compile_and_link_in_one_step_compiles_as_the_compiler_then_links": ("clang19",),
        "test_real_compiles_give_the_compilers_object_byte_for_byte": ("clang19", "gcc_offload"),
    }),
    "test_users_recipes.py": (("clang19", "gcc_offload"), {
        "test_cmake_linker_launcher_alone_for_a_project_nobody_edits":
            ("clang19", "gcc_offload", "other_tools"),
        "test_cmake_offlink_enable_link_only_and_flags_added_after_it": ("clang19", "other_tools"),
        "test_cmake_offlink_enable_wraps_only_the_links": ("clang19", "gcc_offload", "other_tools"),
        "test_gcc_fopenmp_alone_through_offlink_cc": ("gcc_offload",),
        "test_meson_native_file_from_offlink_config": ("clang19", "gcc_offload", "other_tools"),
        "test_meson_native_file_text": (),
    }),
    "test_verify.py": (("host",), {}),
}


@pytest.hookimpl(tryfirst=True)  # before -m selects by them
def pytest_collection_modifyitems(config, items) -> None:
    for item in items:
        for marker in sorted(markers_of(item)) or ["unit"]:
            item.add_marker(marker)


_running = None  # the test running now, for need_tool's check


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    global _running
    _running = item
    try:
        yield
    finally:
        _running = None


def _check_marked(item, reason: str) -> None:
    """A unit test that asks for a tool is in the wrong tier: `make test-fast` would run it
    on a machine without the tool. Fails it, whether or not the tool is there. A test of
    another tier that asks for a tool its markers do not name is warned about: `-m` leaves it
    out of that tool's tests."""
    if item.get_closest_marker("unit"):
        pytest.fail(f"{item.nodeid} needs a tool ({reason}) but is marked as a unit test: "
                    f"add it to NEEDS in tests/conftest.py with what it needs", pytrace=False)
    unmarked = sorted(reason_markers(reason) - {"host"}
                      - {mark.name for mark in item.iter_markers()})
    if unmarked:
        warnings.warn(pytest.PytestWarning(
            f"{item.nodeid} needs a tool ({reason}) but is not marked {', '.join(unmarked)}: "
            f"add that to its entry in NEEDS in tests/conftest.py"), stacklevel=3)


# `--no-toolchains` (make test-fast): the tests run as on a machine without toolchains. Every
# compiler, linker, binutils tool, build tool and offload tool on PATH is shadowed by a stand-in
# that fails, naming itself, so a unit test that runs one fails there rather than later on such
# a machine. (A tool named by its absolute path is not shadowed: such tests call need_tool.)
TOOLCHAIN_PROGRAM = re.compile(
    r"(clang|llvm|lld|ld\.|flang|gfortran|nvptx|[a-z0-9_]+-linux-gnu-|nvcc|ptxas|nvlink|fatbinary"
    r"|cmake|meson|ninja|pkg-config|distcc|sccache|redis-|FileCheck).*"
    r"|(gcc|g\+\+|cc|c\+\+|cpp|ld|as|ar|nm|objcopy|objdump|readelf|strip|ranlib|make|opt|llc)"
    r"(-[0-9.]+)?")
STAND_IN = """#!/bin/sh
echo "offlink tests: ${0##*/} run under --no-toolchains (make test-fast): mark the test \
by what it needs (NEEDS in tests/conftest.py)" >&2
exit 127
"""


def shadow_toolchains(folder: Path, path: str) -> str:
    """A PATH with `folder` first, holding a failing stand-in for each toolchain program on
    `path`."""
    stand_in = folder / ".stand-in"
    stand_in.write_text(STAND_IN)
    stand_in.chmod(0o755)
    for directory in filter(None, path.split(os.pathsep)):
        try:
            names = os.listdir(directory)
        except OSError:
            continue
        for name in names:
            if TOOLCHAIN_PROGRAM.fullmatch(name) and not (folder / name).exists():
                (folder / name).symlink_to(stand_in)
    return os.pathsep.join([str(folder), path])


def pytest_addoption(parser) -> None:
    parser.addoption("--no-toolchains", action="store_true",
                     help="shadow every compiler, linker and build tool on PATH with a stand-in "
                          "that fails (make test-fast)")


@pytest.fixture(scope="session")
def offlink(tmp_path_factory) -> str:
    return offlink_command(tmp_path_factory.mktemp("bin"))


@pytest.fixture(scope="session", autouse=True)
def _isolated_cache(tmp_path_factory):
    """Keep the runtime library and any compile cache inside the test session."""
    os.environ.setdefault("OFFLINK_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))


# `python -c IMPORTS_SAID MODULES SAID_FILE WORDS...`: `offlink WORDS...` in a fresh interpreter,
# writing to SAID_FILE at exit which of MODULES (comma-separated) it imported.
IMPORTS_SAID = """import atexit, sys
def said(names=sys.argv[1].split(","), path=sys.argv[2]):
    with open(path, "w") as f:
        print(sorted(set(names) & set(sys.modules)), file=f)
atexit.register(said)
sys.argv = ["offlink", *sys.argv[3:]]
from offlink.cli import main
main()
"""


def run(argv, cwd=None, env=None, check=True) -> subprocess.CompletedProcess:
    proc = subprocess.run([str(a) for a in argv], cwd=cwd, env=env, capture_output=True,
                          text=True)
    if check and proc.returncode != 0:
        raise AssertionError(f"{' '.join(map(str, argv))} failed ({proc.returncode}):\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def copy_sample(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(SAMPLES / name, target, ignore=shutil.ignore_patterns("build*"))
    return target


def make_sample(offlink: str, sample: Path, *targets: str, **variables: str):
    """Build (and run) a sample; every link in it is also checked by lief (OFFLINK_VERIFY)."""
    args = ["make", "-s", "-C", sample, f"OFFLINK={offlink}", *targets]
    args += [f"{k}={v}" for k, v in variables.items()]
    return run(args, env={**os.environ, "OFFLINK_VERIFY": "deep"})
