"""The build tooling's own logic: the in-tree build backend (build_backend/tokcore_build.py)."""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def build_backend() -> ModuleType:
    # a wheel's test environment has no setuptools: the backend is the sdist's concern
    pytest.importorskip("setuptools")
    spec = importlib.util.spec_from_file_location(
        "_tokcore_build_under_test", ROOT / "build_backend" / "tokcore_build.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pyproject_names_the_backend() -> None:
    system = PYPROJECT["build-system"]
    assert system["build-backend"] == "tokcore_build"
    assert system["backend-path"] == ["build_backend"]
    # Cython is asked for by the backend, never listed where a pure build would fetch it
    assert not any(r.lower().startswith("cython") for r in system["requires"])


def test_cython_only_for_a_compiled_build(build_backend: ModuleType,
                                          monkeypatch: pytest.MonkeyPatch) -> None:
    cython = build_backend.requirement("build", "Cython")
    assert cython in PYPROJECT["dependency-groups"]["build"]
    assert cython.startswith("Cython>=") and "<" in cython  # a floor and a bound
    monkeypatch.delenv("TOKCORE_NO_EXTENSIONS", raising=False)
    assert cython in build_backend.get_requires_for_build_wheel()
    assert cython in build_backend.get_requires_for_build_editable()
    monkeypatch.setenv("TOKCORE_NO_EXTENSIONS", "1")
    assert not any("cython" in r.lower() for r in build_backend.get_requires_for_build_wheel())
    assert not any("cython" in r.lower() for r in build_backend.get_requires_for_build_sdist())


def test_old_setuptools_is_named(build_backend: ModuleType,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    floor = build_backend.setuptools_floor()
    assert f"setuptools>={floor}" in PYPROJECT["build-system"]["requires"]
    monkeypatch.setattr(build_backend.setuptools, "__version__", f"{floor - 1}.3.0")
    with pytest.raises(SystemExit, match=rf"needs setuptools>={floor}.*has {floor - 1}\.3\.0"):
        build_backend._check_setuptools()
    monkeypatch.setattr(build_backend.setuptools, "__version__", f"{floor}.0.0")
    build_backend._check_setuptools()


def test_unknown_group_line(build_backend: ModuleType) -> None:
    with pytest.raises(LookupError, match="no nothing-here in dependency group 'build'"):
        build_backend.requirement("build", "nothing-here")


def test_contributing_pages_name_real_targets() -> None:
    """Every `make X` that testing.md and release.md tell a contributor to run exists."""
    import re

    targets = set(re.findall(r"^([\w-]+):", (ROOT / "Makefile").read_text(), flags=re.M))
    named = 0
    for page in ("testing.md", "release.md"):
        text = (ROOT / "docs" / "contributing" / page).read_text(encoding="utf-8")
        for target in re.findall(r"make ([a-z][\w-]*)", text):
            assert target in targets, f"{page}: make {target} is no Makefile target"
            named += 1
    assert named > 5


def test_matrix_fails_where_a_build_fails(tmp_path: Path) -> None:
    """tools/test_matrix.sh on an interpreter whose in-place build fails: the job fails at that
    version with the build's log, and its tests are not run (the build's status was dropped
    by ``|| true``)."""
    import shutil
    import subprocess

    (tmp_path / "tools").mkdir()
    shutil.copy2(ROOT / "tools" / "test_matrix.sh", tmp_path / "tools")
    (tmp_path / "pyproject.toml").write_text("")
    python = tmp_path / "versions" / "3.99.1" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(  # venv, pip and pytest succeed; the build does not
        '#!/bin/sh\ncase "$1 $2" in\n'
        '  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0 ;;\n'
        '  "-m pip") exit 0 ;;\n  "-m pytest") echo "the tests ran"; exit 0 ;;\nesac\n'
        'echo "tokcore/_x_c.c:1:1: error: the compiler broke" >&2\nexit 1\n')
    python.chmod(0o755)
    done = subprocess.run(["bash", "tools/test_matrix.sh"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": "/usr/bin:/bin", "MATRIX": "3.99",
                                          "PYENV_VERSIONS": str(tmp_path / "versions")},
                          check=False)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "error: the compiler broke" in done.stdout
    assert "3.99.1: FAILED (the build" in done.stdout
    assert "the tests ran" not in done.stdout + done.stderr


def _runner(script: Path) -> object:
    """A bench script's ``RUNNER`` as its source assigns it (the default: pyperf)."""
    import ast

    for node in ast.parse(script.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and [getattr(t, "id", None) for t in node.targets] \
                == ["RUNNER"]:
            return ast.literal_eval(node.value)
    return "pyperf"


def test_make_bench_runs_only_what_its_venv_has() -> None:
    """``make bench`` (bench/report.py, the bench venv) runs every bench script but those
    with a target of their own: a script that starts vLLM's server is one (it needs vLLM's
    venv: ``make bench-vllm``), and its target is a Makefile target that runs it."""
    import sys

    sys.path.insert(0, str(ROOT / "bench"))
    try:
        from _common import RUNNERS
    finally:
        sys.path.remove(str(ROOT / "bench"))
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    scripts = sorted((ROOT / "bench").glob("bench_*.py"))
    assert scripts
    for script in scripts:
        kind = _runner(script)
        assert kind in RUNNERS, (script.name, kind)
        source = script.read_text(encoding="utf-8")
        assert (kind == "own") == ("_vllm_server" in source), script.name
        if kind == "own":
            target = re.search(r'^OWN_TARGET = "make ([\w-]+)"$', source, re.M)
            assert target, script.name
            rule = re.search(rf"^{target.group(1)}:.*\n((?:\t.*\n)+)", makefile, re.M)
            assert rule and f"bench/{script.name}" in rule.group(1), script.name


def test_make_test_vllm_runs_every_vllm_test() -> None:
    """``make test-vllm`` runs every ``tests/**/test_vllm*.py`` (the pytest commands ``make
    -n`` prints for it name each file), and each file's docstring says so: it names ``make
    test-vllm``, and ``make test`` too where the file needs no vLLM (make test runs it)."""
    import os
    import shutil
    import subprocess

    make = shutil.which("make")
    if make is None:
        pytest.skip("no make here: the Makefile's targets need one")
    # (a make of its own: not the jobserver of the make test that may be running this)
    env = {k: v for k, v in os.environ.items()
           if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL", "MAKEOVERRIDES")}
    done = subprocess.run([make, "-n", "--no-print-directory", "test-vllm"], cwd=ROOT, env=env,
                          capture_output=True, text=True, check=True)
    commands = [line for line in done.stdout.replace("\\\n", " ").splitlines()
                if " -m pytest " in line]
    run = {word for line in commands for word in line.split() if word.endswith(".py")}
    files = sorted(path.relative_to(ROOT).as_posix()
                   for path in (ROOT / "tests").rglob("test_vllm*.py"))
    assert files
    assert not [name for name in files if name not in run], (files, commands)
    for name in files:
        source = (ROOT / name).read_text(encoding="utf-8")
        docstring = source.split('"""')[1]
        assert "make test-vllm" in docstring, name
        if 'importorskip("vllm"' not in source:  # (runs in make test's venv too)
            assert re.search(r"make test(?!-)", docstring), name
