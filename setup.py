"""The C extension: one abi3 module (CPython 3.9 limited API) that serves every Python 3.x.

Declared here rather than under [tool.setuptools] in pyproject.toml, where setuptools still
calls ext-modules and bdist_wheel options experimental and warns on every install.
"""

from setuptools import Extension, setup

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
    options={"bdist_wheel": {"py_limited_api": "cp39"}},
)
