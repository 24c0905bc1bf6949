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
    import sys

    (tmp_path / "tools").mkdir()
    for script in ("test_matrix.sh", "cache.sh"):
        shutil.copy2(ROOT / "tools" / script, tmp_path / "tools")
    (tmp_path / "pyproject.toml").write_text(
        '[dependency-groups]\nbuild = ["setuptools"]\ntest = ["pytest"]\n')
    python = tmp_path / "versions" / "3.99.1" / "bin" / "python3"
    python.parent.mkdir(parents=True)
    python.write_text(  # venv, pip and pytest succeed; the build does not
        '#!/bin/sh\ncase "$1 $2" in\n  "-VV ") echo "Python 3.99.1"; exit 0 ;;\n'
        '  "-m venv") mkdir -p "$3/bin" && cp "$0" "$3/bin/python"; exit 0 ;;\n'
        '  "-m pip") exit 0 ;;\n  "-m pytest") echo "the tests ran"; exit 0 ;;\nesac\n'
        'echo "tokcore/_x_c.c:1:1: error: the compiler broke" >&2\nexit 1\n')
    python.chmod(0o755)
    path = f"{Path(sys.executable).parent}:/usr/bin:/bin"  # a python3 for tools/cache.sh
    done = subprocess.run(["bash", "tools/test_matrix.sh"], cwd=tmp_path, capture_output=True,
                          text=True, env={"PATH": path, "MATRIX": "3.99",
                                          "PYENV_VERSIONS": str(tmp_path / "versions"),
                                          "TOKCORE_CACHE": str(tmp_path / "cache")},
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


def _ci_tree(tmp_path: Path, makefile: str) -> tuple[Path, dict[str, str]]:
    """A git tree with this .ci/run and tools/cache.sh, a stub Makefile whose every target
    echoes its name (and runs ``makefile``'s extra lines), and the environment to run it."""
    import os
    import shutil
    import subprocess
    import sys

    tree = tmp_path / "tree"
    for folder in (".ci", "tools", "tokcore", ".venv/bin"):
        (tree / folder).mkdir(parents=True)
    shutil.copy2(ROOT / ".ci" / "run", tree / ".ci")
    shutil.copy2(ROOT / "tools" / "cache.sh", tree / "tools")
    (tree / ".venv" / "bin" / "python").symlink_to(sys.executable)
    (tree / "tokcore" / "_x_c.pyx").write_text("one\n")
    (tree / "README.md").write_text("one\n")
    (tree / ".gitignore").write_text("build/\n.venv/\n")
    (tree / "Makefile").write_text("%:\n\t@echo make $@\n" + makefile)
    env = {"PATH": os.environ["PATH"], "HOME": str(tmp_path), "CI_POLL": "0.05",
           "TOKCORE_CACHE": str(tmp_path / "cache"), "GIT_AUTHOR_NAME": "t",
           "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t"}
    for command in (["git", "init", "-q"], ["git", "add", "-A"], ["git", "commit", "-qm", "x"]):
        subprocess.run(command, cwd=tree, env=env, check=True)
    return tree, env


def _ci(tree: Path, env: dict[str, str], **more: str) -> tuple[int, str]:
    import subprocess

    done = subprocess.run(["bash", ".ci/run"], cwd=tree, env={**env, **more},
                          capture_output=True, text=True, check=False)
    return done.returncode, done.stdout + done.stderr


def _skipped(output: str) -> list[str]:
    return sorted(line.split(":")[1].strip() for line in output.splitlines()
                  if line.startswith("ci: ") and ": skipped: " in line)


needs_git_and_make = pytest.mark.skipif(
    not all(__import__("shutil").which(tool) for tool in ("git", "make")),
    reason="runs .ci/run in a git tree of its own with make")


@needs_git_and_make
def test_ci_skips_the_compiled_code_jobs_only_when_what_they_read_is_unchanged(
        tmp_path: Path) -> None:
    """.ci/run's READS jobs run, then are skipped in one line each while nothing they read
    changes (a README edit is not theirs), and run again when a source changes; a job that
    failed is not skipped the next time."""
    tree, env = _ci_tree(tmp_path, '\t@[ -z "$(FAIL)" ] || [ "$@" != sanitize ] || exit 3\n')
    compiled = ["sanitize", "test-aarch64", "test-cython-floor", "test-freethreaded"]
    status, output = _ci(tree, env, FAIL="1")
    assert status == 1 and "sanitize: FAILED" in output, output
    assert _skipped(output) == [] and "make test-aarch64" in output
    (tree / "README.md").write_text("two\n")
    status, output = _ci(tree, env)
    assert status == 0, output
    assert _skipped(output) == compiled[1:], output  # sanitize had failed: it runs
    status, output = _ci(tree, env)
    assert status == 0 and _skipped(output) == compiled, output
    assert "make test-matrix" in output and "make sanitize" not in output
    (tree / "tokcore" / "_x_c.pyx").write_text("two\n")
    status, output = _ci(tree, env)
    assert status == 0 and _skipped(output) == [], output
    status, output = _ci(tree, env, CI_ALL="1")
    assert status == 0 and _skipped(output) == [], output


@needs_git_and_make
def test_ci_fails_past_its_budget(tmp_path: Path) -> None:
    """A job still running past CI_BUDGET is stopped, its log so far printed, and the run
    fails naming the budget."""
    tree, env = _ci_tree(tmp_path, '\t@[ "$@" != test ] || { echo started; sleep 30; }\n')
    status, output = _ci(tree, env, CI_BUDGET="2")
    assert status == 1, output
    assert "ci: FAILED: past the budget of 2 s (CI_BUDGET, .ci/run)" in output
    assert "ci: test: stopped, its log so far" in output and "started" in output


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
