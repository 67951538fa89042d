"""The C extension: one abi3 module (CPython 3.9 limited API) that serves every Python 3.x;
and the prebuilt runtime library with its pkg-config and CMake files.

Declared here rather than under [tool.setuptools] in pyproject.toml, where setuptools still
calls ext-modules and bdist_wheel options experimental and warns on every install.

The runtime library (offlink/runtime/lib/libofflink.a, offlink.pc, offlinkConfig.cmake) is
made by the build_ext step, into the wheel, or into the source tree for an editable install,
so `offlink config --libs` needs no C compiler. Like the extension it is optional: without a
working compiler the package still installs and offlink builds the library on first use.
"""

import importlib.util
import os
import re
import shlex
import sys
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent
RUNTIME = HERE / "offlink" / "runtime"


def load_recipe():
    spec = importlib.util.spec_from_file_location("offlink_recipe", RUNTIME / "recipe.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class build_ext_and_runtime(build_ext):
    """build_ext, then libofflink.a and its config files beside the package's runtime sources."""

    def run(self):
        super().run()
        recipe = load_recipe()
        inplace = self.inplace or getattr(self, "editable_mode", False)
        base = HERE if inplace else Path(self.build_lib)
        dest = base / "offlink" / "runtime" / recipe.PREBUILT
        version = re.search(r'^__version__ = "([^"]+)"',
                            (HERE / "offlink" / "__init__.py").read_text(), re.M).group(1)
        cc = shlex.split(os.environ.get("CC") or "cc")
        try:
            with tempfile.TemporaryDirectory() as tmp:
                recipe.build_prebuilt(RUNTIME, dest, version, cc, os.environ.get("AR") or "ar",
                                      Path(tmp))
        except Exception as e:  # noqa: BLE001 - any failure leaves the build on demand
            print(f"offlink: warning: the prebuilt runtime library was not built ({e}); "
                  f"offlink will build it on first use", file=sys.stderr)


setup(
    ext_modules=[
        Extension(
            "offlink._ctable",
            sources=["offlink/runtime/table.c", "offlink/runtime/pytable.c"],
            include_dirs=["offlink/runtime"],
            define_macros=[("Py_LIMITED_API", "0x03090000")],
            extra_compile_args=["-O2", "-std=c11"],
            py_limited_api=True,
            # A machine without a working C compiler still installs, with the pure-Python
            # table; `offlink --version` names the backend in use.
            optional=True,
        )
    ],
    cmdclass={"build_ext": build_ext_and_runtime},
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
