"""Stage 6's command line as data (offlink/link/host.py): pure functions, literal argv."""

from offlink.link.host import added_inputs, host_argv
from offlink.link.plan import plan_link
from offlink.plugins import Target


class Adds(Target):
    """A target that adds words to the host link, as GCC's adds -foffload=disable."""

    name = "adds"

    def host_link_args(self, plan):
        return ["-foffload=disable"]


class Drops(Target):
    """A target that replaces the driver's own offload link, as clang's OpenMP targets do."""

    name = "drops"

    def host_link_drops(self, word):
        return word.startswith("-fopenmp-targets=") or word == "-mllvm"


def test_added_inputs_are_placeholder_registrations_then_target_words():
    plan = plan_link(["gcc", "a.o", "-o", "app"])
    assert added_inputs(plan, "w/offlink-table.o", ["w/offlink-gomp-register.o"],
                        [Adds(), Target()]) == \
        ["w/offlink-table.o", "w/offlink-gomp-register.o", "-foffload=disable"]


def test_host_argv_writes_the_staged_output_after_the_added_inputs():
    plan = plan_link(["gcc", "-fopenmp", "main.o", "-lm", "-o", "app"])
    added = added_inputs(plan, "w/offlink-table.o", [], [Adds()])
    assert host_argv(plan, "w/out/app", added, [Adds()]) == \
        ["gcc", "-fopenmp", "main.o", "-lm", "w/offlink-table.o", "-foffload=disable",
         "-o", "w/out/app"]


def test_host_argv_resets_the_language_and_drops_what_a_target_replaces():
    plan = plan_link(["clang", "-fopenmp", "-fopenmp-targets=nvptx64", "-x", "c", "m.o",
                      "-mllvm", "-x=1", "-o", "app"])
    assert host_argv(plan, "out", ["t.o"], [Drops()]) == \
        ["clang", "-fopenmp", "-x", "c", "m.o", "-x", "none", "t.o", "-o", "out"]
