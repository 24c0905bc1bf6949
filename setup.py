"""Declares the Cython extensions; everything else is in pyproject.toml.

TOKCORE_NO_EXTENSIONS=1 builds none (a pure-Python install). TOKCORE_REQUIRE_EXTENSIONS=1
turns a failed compile into a failed build; otherwise a failure leaves the pure twin in use.
"""

import importlib.util
import pathlib
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = pathlib.Path(__file__).parent


def _load_backend():  # the env-var rules live in one place: tokcore/_backend.py
    path = HERE / "tokcore" / "_backend.py"
    spec = importlib.util.spec_from_file_location("_tokcore_backend", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


backend = _load_backend()
NO_EXTENSIONS = backend.env_flag(backend.NO_EXTENSIONS_VAR)
REQUIRE_EXTENSIONS = backend.env_flag(backend.REQUIRE_EXTENSIONS_VAR)


class OptionalBuildExt(build_ext):
    """build_ext that falls back to the pure twins unless extensions are required."""

    def run(self):
        try:
            super().run()
        except Exception as exc:  # no compiler at all
            self._give_up(exc)

    def build_extension(self, ext):
        try:
            super().build_extension(ext)
        except Exception as exc:  # this module failed to compile
            self._give_up(exc, ext.name)

    def _give_up(self, exc, name="extensions"):
        if REQUIRE_EXTENSIONS:
            raise
        print(f"WARNING: building {name} failed ({exc}); the pure-Python twin will be used",
              file=sys.stderr)


def extensions():
    if NO_EXTENSIONS:
        return []
    from Cython.Build import cythonize

    modules = [
        Extension(f"tokcore.{pyx.stem}", [str(pyx.relative_to(HERE))],
                  extra_compile_args=["-O3"] if sys.platform != "win32" else ["/O2"])
        for pyx in sorted((HERE / "tokcore").glob("_*_c.pyx"))
    ]
    return cythonize(modules, compiler_directives={
        "language_level": 3, "boundscheck": False, "wraparound": False,
        "cdivision": True, "initializedcheck": False, "embedsignature": True,
    })


setup(ext_modules=extensions(), cmdclass={"build_ext": OptionalBuildExt})
