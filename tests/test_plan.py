"""plan_link and plan_compile are pure: literal command lines in, plans out."""

from __future__ import annotations

import pytest

from offlink.cc.plan import plan_compile
from offlink.driver_args import words
from offlink.errors import UsageError
from offlink.link.host import host_link_argv
from offlink.link.plan import Input, plan_link


def test_plain_executable():
    p = plan_link(["gcc", "a.o", "b.o", "-o", "prog"])
    assert (p.driver, p.output, p.mode, p.static, p.strip) == ("gcc", "prog", "executable",
                                                             False, False)
    assert p.inputs == [Input("file", "a.o"), Input("file", "b.o")]
    assert host_link_argv(p, "tmp", ["ph.o"]) == ["gcc", "a.o", "b.o", "ph.o", "-o", "tmp"]


def test_output_forms_and_default():
    assert plan_link(["gcc", "a.o", "-oprog"]).output == "prog"
    assert plan_link(["gcc", "a.o"]).output == "a.out"
    assert plan_link(["gcc", "-o", "x", "a.o", "-o", "y"]).output == "y"


def test_modes():
    assert plan_link(["gcc", "-shared", "a.o", "-o", "l.so"]).mode == "shared"
    assert plan_link(["gcc", "-r", "a.o", "-o", "r.o"]).mode == "relocatable"
    assert plan_link(["gcc", "-Wl,-r", "a.o"]).mode == "relocatable"
    p = plan_link(["gcc", "-static", "a.o"])
    assert p.static and p.mode == "executable"
    assert plan_link(["gcc", "-static-pie", "a.o"]).pie is True
    assert plan_link(["gcc", "-no-pie", "a.o"]).pie is False


def test_shared_is_not_split_as_short_options():
    # -shared, -pthread, -lv must not be read as clustered short options (click reads `-lv` as
    # `-l` plus `-v`).
    p = plan_link(["gcc", "-shared", "-pthread", "a.o", "-lv", "-o", "l.so"])
    assert p.mode == "shared"
    assert Input("library", "v") in p.inputs
    assert "-pthread" in p.base_args


def test_strip_is_taken_out_and_done_after_the_fill():
    for argv in (["gcc", "-s", "a.o"], ["gcc", "-Wl,-s", "a.o"], ["gcc", "-Wl,--strip-all", "a.o"],
                 ["gcc", "-Xlinker", "-s", "a.o"]):
        p = plan_link(argv)
        assert p.strip, argv
        assert p.base_args == ["a.o"], argv
    p = plan_link(["gcc", "-Wl,--gc-sections,-s,-O1", "a.o"])
    assert p.strip and p.base_args == ["-Wl,--gc-sections,-O1", "a.o"]
    assert not plan_link(["gcc", "-Wl,-S", "a.o"]).strip  # strip-debug keeps .symtab


def test_libraries_and_archive_modes():
    p = plan_link(["gcc", "main.o", "-L", "lib", "-Llib2", "-Wl,--whole-archive", "libfat.a",
                   "-Wl,--no-whole-archive", "-Wl,-Bstatic", "-lfoo", "-Wl,-Bdynamic", "-lm",
                   "-l:exact.a", "-o", "p"])
    assert p.lib_dirs == ["lib", "lib2"]
    assert p.inputs == [Input("file", "main.o"), Input("file", "libfat.a", whole_archive=True),
                        Input("library", "foo", static=True), Input("library", "m"),
                        Input("library", ":exact.a")]


def test_groups():
    p = plan_link(["gcc", "-Wl,--start-group", "a.a", "b.a", "-Wl,--end-group", "c.a"])
    assert [i.group for i in p.inputs] == [1, 1, 0]


def test_response_file(tmp_path):
    rsp = tmp_path / "args.rsp"
    rsp.write_text('a.o "b c.o" -o out -shared\n')
    p = plan_link(["gcc", f"@{rsp}", "-lm"])
    assert p.output == "out" and p.mode == "shared"
    assert [i.path for i in p.inputs] == ["a.o", "b c.o", "m"]


def test_missing_response_file_stays_a_word():
    assert plan_link(["gcc", "@nonexistent"]).inputs == [Input("file", "@nonexistent")]


def test_lto_and_dashdash():
    assert plan_link(["gcc", "-flto", "a.o"]).lto
    assert plan_link(["gcc", "-flto=auto", "a.o"]).lto
    assert not plan_link(["gcc", "-flto", "-fno-lto", "a.o"]).lto
    # options that tune an LTO link turn none on (gcc's and clang's alike)
    for word in ("-flto-partition=one", "-flto-compression-level=3", "-flto-jobs=2",
                 "-flto-report"):
        assert not plan_link(["gcc", word, "a.o"]).lto, word
        assert plan_link(["gcc", "-flto=jobserver", word, "a.o"]).lto, word
    p = plan_link(["gcc", "a.o", "--", "-weird.o"])
    assert Input("file", "-weird.o") in p.inputs


def test_missing_value_is_a_usage_error():
    with pytest.raises(UsageError, match="missing argument to '-o'"):
        plan_link(["gcc", "a.o", "-o"])
    with pytest.raises(UsageError):
        plan_link([])


def test_attached_forms_do_not_swallow_longer_options():
    ws = words(["-static", "-shared", "-lm", "-L/x", "-Bsymbolic", "-Bstatic", "-include",
                "h.h", "-DX=1", "-isystem/y"])
    assert [(w.option, w.value) for w in ws] == [
        ("-static", ""), ("-shared", ""), ("-l", "m"), ("-L", "/x"), ("-Bsymbolic", ""),
        ("-Bstatic", ""), ("-include", "h.h"), ("-D", "X=1"), ("-isystem/y", "")]


def test_plan_compile_splits_options():
    p = plan_compile(["gcc", "-O2", "-g", "-DX=1", "-Iinc", "-MD", "-MF", "a.d", "-fPIE",
                      "-flto", "-std=c11", "-fPIC", "-fpic", "-c", "a.c", "-o", "a.o"], ["host"])
    assert p is not None
    assert [s.path for s in p.sources] == ["a.c"] and p.sources[0].output == "a.o"
    assert p.sources[0].language == "c"
    assert p.target_options == ["-O2", "-g", "-std=c11"]
    assert "-DX=1" in " ".join(p.preprocess_args) and "-Iinc" in " ".join(p.preprocess_args)
    assert "-MD" not in p.preprocess_args and "a.d" not in p.preprocess_args
    assert p.output_given


def test_plan_compile_languages_and_pass_through():
    assert plan_compile(["g++", "-c", "a.c"], ["host"]).sources[0].language == "c++"
    assert plan_compile(["gcc", "-c", "a.cpp"], ["host"]).sources[0].language == "c++"
    assert plan_compile(["gcc", "-x", "c++", "-c", "a.inc"], ["host"]).sources[0].language == \
        "c++"
    assert plan_compile(["gcc", "-c", "a.c", "b.c"], ["host"]).sources[1].output == "b.o"
    assert plan_compile(["gcc", "-E", "a.c"], ["host"]) is None
    assert plan_compile(["gcc", "-S", "a.c"], ["host"]) is None
    assert plan_compile(["gcc", "-c", "a.s"], ["host"]) is None
    assert plan_compile(["gcc", "a.o", "-o", "p"], ["host"]) is None


def test_plan_compile_reads_a_clang_line_with_clangs_table():
    """`offlink cc clang-19` reads the line as clang 19 does: -resource-dir, -include-pch and
    -MJ take the next word (GCC's table made each value an input, so the preprocessing got
    `-resource-dir -x c` and failed, and `-MJ a.json -O2` wrote a file named -O2). The
    compilation database entry is the host compile's alone, as a depfile; a PCH is used by
    the preprocessing, whose output holds what it declares. gcc keeps GCC's table."""
    line = ["-c", "-resource-dir", "/r", "-include-pch", "h.pch", "-MJ", "a.json", "-O2",
            "a.c", "-o", "a.o"]
    p = plan_compile(["clang-19", *line], ["host"])
    assert [s.path for s in p.sources] == ["a.c"]
    assert p.preprocess_args == ["-resource-dir", "/r", "-include-pch", "h.pch", "-O2"]
    assert p.target_options == ["-resource-dir", "/r", "-O2"]
    g = plan_compile(["gcc", *line], ["host"])
    assert "/r" not in g.preprocess_args and "h.pch" not in g.preprocess_args


def test_unknown_target():
    with pytest.raises(UsageError, match="unknown offload target 'vax'"):
        plan_compile(["gcc", "-c", "a.c"], ["vax"])


def test_static_applies_to_the_whole_line():
    p = plan_link(["gcc", "main.o", "-lops", "-static", "-o", "p"])
    assert p.static and Input("library", "ops", static=True) in p.inputs


def test_language_in_force_is_reset_before_offlinks_object():
    p = plan_link(["gcc", "fat.o", "-x", "c", "extra.c", "-o", "p"])
    assert host_link_argv(p, "tmp", ["ph.o"])[-5:] == ["-x", "none", "ph.o", "-o", "tmp"]
    assert "none" not in host_link_argv(plan_link(["gcc", "a.o"]), "tmp", ["ph.o"])


def test_output_named_to_the_linker():
    for argv in (["gcc", "a.o", "-Wl,-o,prog"], ["gcc", "a.o", "-Wl,--output=prog"],
                 ["gcc", "-Wl,--gc-sections,-o,prog", "a.o"]):
        p = plan_link(argv)
        assert p.output == "prog", argv
        assert "prog" not in " ".join(p.base_args), argv
    assert plan_link(["gcc", "-Wl,--gc-sections,-o,prog", "a.o"]).base_args == \
        ["-Wl,--gc-sections", "a.o"]


@pytest.mark.parametrize("first", ["a.o", "lib/libx.a", "libz.so.1.3", "main.c", "-o", "x.lo"])
def test_first_word_must_be_the_driver(first):
    with pytest.raises(UsageError, match="must be the compiler driver"):
        plan_link([first, "b.o", "-o", "app"])
    with pytest.raises(UsageError, match="must be the compiler driver"):
        plan_compile([first, "-c", "b.c"], ["host"])


@pytest.mark.parametrize("driver", ["gcc", "/usr/bin/g++-12", "clang-19", "cc",
                                    "x86_64-linux-gnu-gcc"])
def test_drivers_are_accepted(driver):
    assert plan_link([driver, "a.o"]).driver == driver


def test_compile_and_link_in_one_step():
    from offlink.cc.plan import plan_compile_and_link

    p = plan_compile_and_link(["gcc", "-O2", "-DX=1", "a.c", "lib.o", "sub/b.c", "-lm", "-L.",
                               "-o", "app"], "W")
    assert p is not None
    assert p.compiles == [["gcc", "-O2", "-DX=1", "-L.", "-c", "a.c", "-o", "W/0-a.o"],
                          ["gcc", "-O2", "-DX=1", "-L.", "-c", "sub/b.c", "-o", "W/1-b.o"]]
    assert p.link == ["gcc", "-O2", "-DX=1", "W/0-a.o", "lib.o", "W/1-b.o", "-lm", "-L.", "-o",
                      "app"]
    # -x in force: the source is compiled as that language, its object read as an object.
    p = plan_compile_and_link(["gcc", "-x", "c", "prog.in", "-x", "none", "z.o"], "W")
    assert p is not None
    assert p.compiles == [["gcc", "-c", "-x", "c", "prog.in", "-o", "W/0-prog.o"]]
    assert p.link == ["gcc", "-x", "c", "-x", "none", "W/0-prog.o", "-x", "c", "-x", "none",
                      "z.o"]
    # The depfile is named after the link output, as gcc names it.
    p = plan_compile_and_link(["gcc", "-MMD", "a.c", "-o", "out/app"], "W")
    assert p is not None
    assert p.compiles == [["gcc", "-MMD", "-MF", "out/app.d", "-MT", "out/app", "-c", "a.c",
                           "-o", "W/0-a.o"]]
    # No source: a link, passed on as it is.
    assert plan_compile_and_link(["gcc", "a.o", "x.s", "-o", "app"], "W") is None
    with pytest.raises(UsageError, match="stdin .* `offlink cc COMPILER -c"):
        plan_compile_and_link(["gcc", "-x", "c", "-", "-o", "app"], "W")


def test_response_files_split_as_gcc_splits_them():
    from offlink.driver_args import split_response_file

    assert split_response_file("-DX='a\\\\b' \"c d\"\te\\ f\n'' g\\'h") == \
        ["-DX=a\\b", "c d", "e f", "", "g'h"]
    assert split_response_file("-DV='1\\2'") == ["-DV=12"]


def test_response_file_kept_whole_is_passed_as_written(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "libs.rsp").write_text("-L. -lm\n")
    (tmp_path / "out.rsp").write_text("a.o -s -o app\n")
    plan = plan_link(["gcc", "@out.rsp", "@libs.rsp", "@missing.rsp"])
    assert plan.output == "app" and plan.strip
    assert plan.base_args == ["a.o", "-L.", "-lm", "@missing.rsp"]
    assert plan.host_args == ["a.o", "@libs.rsp", "@missing.rsp"]


# clang 19's options that take the next word (driver_args.CLANG_SEPARATE, read from clang-19),
# each followed by a word that would otherwise be an input, a library or the output.
CLANG_WORDS = [
    ["-Xarch_host", "-lm"], ["-Xarch_device", "-lm"], ["-Xarch_sm_80", "-lm"],
    ["-Xarch_x86_64", "-Wl,--defsym=a=1"], ["-Xcuda-ptxas", "-v"], ["-Xcuda-fatbinary", "x.o"],
    ["-Xclang", "-oops"], ["-mllvm", "-openmp-opt-disable-spmdization"], ["-target", "x.o"],
    ["--config", "c.cfg"], ["-include", "h.o"], ["-MF", "d.o"], ["-MT", "-lm"],
    ["-Xopenmp-target=x86_64-pc-linux-gnu", "-lm"], ["-Xoffload-linker-nvptx64", "-lm"],
    ["-Zlinker-input", "-lm"], ["-sectcreate", "s", "t", "f.o"], ["-segaddr", "s", "x.o"]]


@pytest.mark.parametrize("taken", CLANG_WORDS, ids=lambda w: w[0])
def test_clangs_options_take_their_next_words(taken):
    """With a clang driver the words after such an option are its value: no input, library
    or output of the link (clang 19's link ignores -Xarch_* and gives -mllvm to the device
    link); the host link keeps them as written, for clang to read, but the device side's."""
    p = plan_link(["clang-19", "a.o", *taken, "-o", "app"])
    assert p.inputs == [Input("file", "a.o")]
    assert p.output == "app"
    kept = [] if taken[0].startswith(("-Xoffload-linker", "-Xopenmp-target")) else taken
    assert host_link_argv(p, "tmp", []) == ["clang-19", "a.o", *kept, "-o", "tmp"]


def test_gcc_keeps_gccs_table():
    """gcc knows no -Xarch_host or --config: the word after them is its own (an input here),
    as gcc reads it, and GCC's -aux-info takes the next word where clang has no such option."""
    p = plan_link(["gcc", "a.o", "-Xarch_host", "-lm", "--config", "b.o"])
    assert p.inputs == [Input("file", "a.o"), Input("library", "m"), Input("file", "b.o")]
    assert [w.option for w in words(["-aux-info", "x.o"])] == ["-aux-info"]
    assert [w.option for w in words(["-aux-info", "x.o"], clang=True)] == ["-aux-info", ""]


def test_clangs_option_without_its_word_is_one_clear_error():
    with pytest.raises(UsageError, match="missing argument to '-Xarch_device'"):
        plan_link(["clang-19", "a.o", "-Xarch_device"])
    with pytest.raises(UsageError, match="missing argument to '-sectcreate'"):
        plan_link(["clang-19", "a.o", "-sectcreate", "s", "t"])
