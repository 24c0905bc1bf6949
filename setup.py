"""Declares the Cython extensions; everything else is in pyproject.toml.

The extensions are required by default: a failed compile fails the build with a message that
says how to get the pure-Python twins on purpose (TOKCORE_NO_EXTENSIONS=1, a wheel tagged
py3-none-any that holds no compiled code). There is no silent fallback: a fallback wheel is
tagged like a compiled one, pip caches it, and later installs reuse it with no word said.
Cython runs inside build_ext, never at import, so an sdist whose build is refused (or asked
to be pure) never needs it; the build backend (build_backend/tokcore_build.py) asks for it
only when the extensions are built.
"""

import importlib.util
import os
import pathlib
import sys

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext
from setuptools.command.build_py import build_py

HERE = pathlib.Path(__file__).parent


def _load(name, path):
    spec = importlib.util.spec_from_file_location(name, HERE / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# the env-var rules live in one place (tokcore/_backend.py), the Cython range in another
# (pyproject.toml's build group, read by the build backend, which also checks setuptools)
backend = _load("_tokcore_backend", "tokcore/_backend.py")
build_rules = _load("_tokcore_build", "build_backend/tokcore_build.py")
NO_EXTENSIONS = backend.env_flag(backend.NO_EXTENSIONS_VAR)
REQUIRE_EXTENSIONS = backend.env_flag(backend.REQUIRE_EXTENSIONS_VAR)

DIRECTIVES = {
    "language_level": 3, "boundscheck": False, "wraparound": False,
    "cdivision": True, "initializedcheck": False, "embedsignature": True,
}


def _flags():
    """-O3, and no debug info unless the caller's CFLAGS ask for it (the sanitizer and fuzz
    builds do) and no symbol table: 2.8 MB of extensions with them, 0.5 MB without."""
    if sys.platform == "win32":
        return ["/O2"], []
    wants_debug = any(flag.startswith("-g") and flag != "-g0"
                      for flag in os.environ.get("CFLAGS", "").split())
    if wants_debug:
        return ["-O3"], []
    link = ["-Wl,-s"] if sys.platform.startswith("linux") else []
    return ["-O3", "-g0"], link


def _check_cython(version):
    """A Cython outside the build group's range (an offline build without isolation) fails
    here, by name, rather than in the C compiler on code it generated wrongly."""
    wanted = build_rules.requirement("build", "Cython")
    try:
        from packaging.requirements import Requirement
    except ImportError:  # setuptools >= 71 carries packaging; without it, no check
        return
    if not Requirement(wanted).specifier.contains(version, prereleases=True):
        raise SystemExit(
            f"tokcore: building the extensions needs {wanted}, this environment has Cython "
            f"{version}: pip install '{wanted}' (or build with pip's default build isolation). "
            f"To install the pure-Python twins instead, set {backend.NO_EXTENSIONS_VAR}=1.")


def _refusal(name, exc):
    why = (f"{backend.REQUIRE_EXTENSIONS_VAR}=1 is set" if REQUIRE_EXTENSIONS
           else "tokcore does not fall back to its pure-Python twins silently")
    return (
        f"tokcore: building {name} failed: {exc}\n"
        f"tokcore: {why}. Building from source needs a C compiler and the Python headers "
        f"(Debian/Ubuntu: apt install gcc python3-dev). To install the pure-Python twins on "
        f"purpose, several times slower, set {backend.NO_EXTENSIONS_VAR}=1 (README: Install)."
    )


class BuildExt(build_ext):
    """build_ext that cythonizes when it runs and names the way out when a compile fails."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None:  # 9 modules: compile them side by side
            self.parallel = os.cpu_count() or 1

    def run(self):
        if not self.extensions:
            return
        try:
            import Cython
            from Cython.Build import cythonize
        except ImportError as exc:
            raise SystemExit(
                f"tokcore: building the extensions needs "
                f"{build_rules.requirement('build', 'Cython')} ({exc}): pip install --group "
                f"build, or build with pip's default build isolation. To install the "
                f"pure-Python twins instead, set {backend.NO_EXTENSIONS_VAR}=1.") from None
        _check_cython(Cython.__version__)
        # cythonize returns new Extension objects: keep setuptools' own, with C sources
        generated = {ext.name: ext for ext in cythonize(
            self.extensions, compiler_directives=DIRECTIVES, quiet=True)}
        for ext in self.extensions:
            ext.sources = generated[ext.name].sources
        try:
            super().run()
        except Exception as exc:  # no compiler at all, or one module failed
            raise SystemExit(_refusal("the extensions", exc)) from None


class BuildPy(build_py):
    """build_py that records a pure build's choice in the package: the marker file makes its
    import quiet (tokcore/_backend.py). A compiled build has none, so its import warns if its
    extensions are ever missing."""

    def run(self):
        super().run()
        target = pathlib.Path(self.build_lib, "tokcore", backend.PURE_BUILD_MARKER)
        if NO_EXTENSIONS:
            target.write_text(backend.PURE_BUILD_TEXT, encoding="utf-8")
        else:  # a build folder a pure build used before: its marker must not ship
            target.unlink(missing_ok=True)

    def get_outputs(self, include_bytecode=1):
        outputs = super().get_outputs(include_bytecode)
        if NO_EXTENSIONS:
            outputs.append(os.path.join(self.build_lib, "tokcore", backend.PURE_BUILD_MARKER))
        return outputs


def extensions():
    if NO_EXTENSIONS:
        return []
    compile_args, link_args = _flags()
    # the C headers the twins include: build_ext recompiles when one is newer than a module
    # (cythonize does not regenerate the C for them, so it would not notice)
    headers = [str(h.relative_to(HERE)) for h in sorted((HERE / "tokcore").rglob("*.h"))]
    # a twin includes its wing's headers by name (beside its C file) and the package's shared
    # ones (_freethreading.h, _cpu.h) from tokcore/
    return [
        Extension(".".join(pyx.relative_to(HERE).with_suffix("").parts),
                  [str(pyx.relative_to(HERE))], depends=headers, include_dirs=["tokcore"],
                  extra_compile_args=compile_args, extra_link_args=link_args)
        for pyx in sorted((HERE / "tokcore").rglob("_*_c.pyx"))
    ]


setup(ext_modules=extensions(), cmdclass={"build_ext": BuildExt, "build_py": BuildPy})
