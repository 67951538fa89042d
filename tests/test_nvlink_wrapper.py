"""The pieces of offlink/toolchains/llvm/nvlink_wrapper.py that decide whether a relink may run
nvlink alone with the device runtime's kept part: which wrapper jobs it takes, what keys the
part (the inputs' symbols, not their code), where the wrapper finds its archives, and how its
`--dry-run` lines become the kept nvlink command. (The images themselves are compared with
clang-22's own in tests/test_clang22_gpu.py.)"""

from __future__ import annotations

from offlink.elf import DataTable, data_object
from offlink.toolchains.llvm import nvlink_wrapper as nw

EM_X86_64 = 62
WRAPPER = "/usr/lib/llvm-22/bin/clang-nvlink-wrapper"
OBJECTS = ["/w/t/0000-main.c.o", "/w/t/0001-k.c.o"]
# clang-22's device link job for two CUs, as its driver prints it
JOB = [WRAPPER, "-o", "/w/t/image", "-arch", "sm_80", "--cuda-path=/usr/local/cuda",
       *OBJECTS, "-lompdevice", "-L/rt/lib/nvptx64-nvidia-cuda",
       "--plugin-opt=-mattr=+ptx88", "-L/usr/lib/llvm-22/lib"]
# what LLVM 22's wrapper printed for `-o runtime` and those objects, --dry-run --save-temps
SAID = (' "ptxas" -m64 -c runtime.s -O3 -arch sm_80 -o runtime.cubin\n'
        ' "nvlink" -arch sm_80 -L /rt/lib/nvptx64-nvidia-cuda -L /usr/lib/llvm-22/lib -o '
        'runtime runtime.cubin 0000-main.c.cubin 0001-k.c.cubin\n')


def test_takes_the_wrapper_job_of_exactly_these_objects():
    options, output = nw._shape(JOB, OBJECTS)
    assert output == "/w/t/image"
    assert options == ["-arch", "sm_80", "--cuda-path=/usr/local/cuda", "-lompdevice",
                       "-L/rt/lib/nvptx64-nvidia-cuda", "--plugin-opt=-mattr=+ptx88",
                       "-L/usr/lib/llvm-22/lib"]
    assert nw._shape(JOB, OBJECTS[:1]) is None  # an input it does not know
    assert nw._shape(JOB, OBJECTS[::-1]) is None  # not in the link's order
    assert nw._shape(["/usr/bin/ld.lld", *JOB[1:]], OBJECTS) is None
    assert nw._shape([*JOB, "--save-temps"], OBJECTS) is None
    assert nw._shape([*JOB, "-L/a dir/lib"], OBJECTS) is None  # printed unquoted
    assert nw._shape([w for w in JOB if w not in ("-o", "/w/t/image")], OBJECTS) is None
    assert nw._shape([*JOB, "/w/user.cubin"], OBJECTS) is None  # an input of its own
    assert nw._shape([*JOB, "--library-path=/x"], OBJECTS) is None  # a search not modelled
    valued = nw._shape([*JOB, "-mllvm", "-nvptx-short-ptr"], OBJECTS)
    assert valued is not None and valued[0][-2:] == ["-mllvm", "-nvptx-short-ptr"]


def test_dry_run_lines_become_the_kept_nvlink_command():
    assemble, kept = nw.dry_run_jobs(SAID, "runtime", OBJECTS)
    assert assemble == ["-m64", "-c", "runtime.s", "-O3", "-arch", "sm_80", "-o",
                        "runtime.cubin"]
    assert kept == ["-arch", "sm_80", "-L", "/rt/lib/nvptx64-nvidia-cuda", "-L",
                    "/usr/lib/llvm-22/lib", "-o", nw.OUT, nw.RT, nw.INPUTS]
    assert nw._filled(kept, "/k/rt.cubin", "/w/t/image", ["/k/0.cubin", "/k/1.cubin"]) == [
        "-arch", "sm_80", "-L", "/rt/lib/nvptx64-nvidia-cuda", "-L", "/usr/lib/llvm-22/lib",
        "-o", "/w/t/image", "/k/rt.cubin", "/k/0.cubin", "/k/1.cubin"]
    # no runtime part (nothing of the archive needed): no ptxas line, no runtime cubin
    bare = SAID.splitlines()[1].replace("runtime.cubin ", "") + "\n"
    assert nw.dry_run_jobs(bare, "runtime", OBJECTS) == (
        [], ["-arch", "sm_80", "-L", "/rt/lib/nvptx64-nvidia-cuda", "-L",
             "/usr/lib/llvm-22/lib", "-o", nw.OUT, nw.INPUTS])


def test_dry_run_lines_of_another_shape_keep_nothing():
    lines = SAID.splitlines()
    for said in (
        lines[1],  # a runtime cubin no ptxas line made
        lines[0],  # no nvlink line
        SAID + lines[0] + "\n",  # two LTO partitions
        SAID.replace("0001-k.c.cubin", "0001-k.c.cubin libextra.cubin"),  # an archive's cubin
        SAID.replace("0000-main.c.cubin 0001-k.c.cubin", "0001-k.c.cubin 0000-main.c.cubin"),
        SAID.replace("-c runtime.s", "-c other.s"),
    ):
        assert nw.dry_run_jobs(said, "runtime", OBJECTS) is None, said


def test_library_search_is_the_wrappers(tmp_path):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir()
    second.mkdir()
    (second / "libompdevice.a").write_bytes(b"!<arch>\n")
    (second / "exact.a").write_bytes(b"!<arch>\n")
    found = nw._libraries([f"-L{first}", "-L", str(second), "-lompdevice", "-l:exact.a",
                           "-lmissing"])
    assert found == [str(second / "libompdevice.a"), str(second / "exact.a"), None]
    # an -mllvm word's value names no folder
    assert nw._libraries(["-mllvm", f"-L{second}", "-lompdevice"]) == [None]
    (first / "libompdevice.a").write_bytes(b"!<arch>\n")  # an earlier folder wins
    assert nw._libraries([f"-L{first}", f"-L{second}", "-lompdevice"]) == [
        str(first / "libompdevice.a")]


def _object(names: list[str], content: bytes) -> bytes:
    return data_object(EM_X86_64, b"strings\0",
                       [DataTable(n, content, ((0, 0),)) for n in names])


def test_the_part_is_keyed_by_the_symbols_not_the_code():
    """An input whose bytes changed under the same symbols keys the same part; another name,
    another symbol, or a file that is not an ELF relocatable does not."""
    a = nw.symbol_digest(_object(["x", "y"], bytes(16)), "a.o")
    assert a is not None
    assert nw.symbol_digest(_object(["x", "y"], bytes(range(16))), "a.o") == a
    assert nw.symbol_digest(_object(["x", "z"], bytes(16)), "a.o") != a
    assert nw.symbol_digest(_object(["x", "y", "w"], bytes(16)), "a.o") != a
    assert nw.symbol_digest(b"BC\xc0\xde" + bytes(60), "a.bc") is None


def test_tools_are_found_where_the_wrapper_finds_them(tmp_path, monkeypatch):
    """findProgram(name, {CudaPath + "/bin"}) then PATH: `--cuda-path`'s bin first; without
    one, `/bin` (never a `bin` folder of the working directory), then PATH."""
    def tool(folder):
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "nvlink").write_text("#!/bin/sh\n")
        (folder / "nvlink").chmod(0o755)
        return str(folder / "nvlink")

    cuda = tool(tmp_path / "cuda" / "bin")
    on_path = tool(tmp_path / "path")
    tool(tmp_path / "work" / "bin")
    monkeypatch.setenv("PATH", str(tmp_path / "path"))
    monkeypatch.chdir(tmp_path / "work")
    assert nw._program("nvlink", [f"--cuda-path={tmp_path / 'cuda'}"]) == cuda
    assert nw._program("nvlink", [f"--cuda-path={tmp_path / 'none'}"]) == on_path
    assert nw._program("nvlink", []) == on_path
