"""The backend choice: env vars, tokcore.BACKEND, python -m tokcore."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import tokcore
from tokcore import _backend

ROOT = Path(__file__).resolve().parent.parent
#: where the tokcore under test lives: the source tree, or site-packages when the suite runs
#: from an unpacked sdist against an installed wheel
PACKAGE_PARENT = Path(tokcore.__file__).resolve().parent.parent


def run_python(code: str, **env: str) -> str:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    environ.update(env, PYTHONPATH=str(PACKAGE_PARENT))
    done = subprocess.run([sys.executable, "-c", code], env=environ, capture_output=True,
                          text=True, check=True, cwd=PACKAGE_PARENT)
    return done.stdout.strip()


def test_no_extensions_loads_python_twins() -> None:
    out = run_python("import tokcore, tokcore._backend as b; print(tokcore.BACKEND, "
                     "sorted(set(b.LOADED.values())), tokcore.pack_ids.__module__)",
                     TOKCORE_NO_EXTENSIONS="1")
    assert out == "python ['python'] tokcore.ids._pack_py"


@pytest.mark.parametrize("value", ["", "0"])
def test_flag_off_values(value: str) -> None:
    out = run_python("import tokcore; print(tokcore.pack_ids.__module__)",
                     TOKCORE_NO_EXTENSIONS=value)
    expected = "tokcore.ids._pack_py" if _backend.NO_EXTENSIONS else "tokcore.ids._pack_c"
    # an off flag changes nothing: the default choice (the Cython twin when built)
    assert out in (expected, "tokcore.ids._pack_c")


def test_env_flag_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, on in [("", False), ("0", False), ("1", True), ("yes", True), ("false", True)]:
        monkeypatch.setenv("TOKCORE_X", value)
        assert _backend.env_flag("TOKCORE_X") is on
    monkeypatch.delenv("TOKCORE_X")
    assert _backend.env_flag("TOKCORE_X") is False


@pytest.mark.skipif(not _backend.REQUIRE_EXTENSIONS, reason="TOKCORE_REQUIRE_EXTENSIONS unset")
def test_required_extensions_are_live() -> None:
    assert tokcore.BACKEND == "cython"
    assert set(_backend.LOADED.values()) == {"cython"}


@pytest.mark.skipif(not _backend.NO_EXTENSIONS, reason="TOKCORE_NO_EXTENSIONS unset")
def test_no_extensions_run_uses_python() -> None:
    assert tokcore.BACKEND == "python"


def test_backend_reports_what_loaded() -> None:
    assert tokcore.BACKEND == _backend.backend_summary()
    assert tokcore.BACKEND in ("cython", "python", "mixed")
    for name, kind in _backend.LOADED.items():
        suffix = "c" if kind == "cython" else "py"
        assert _backend.MODULES[name].__name__ == f"tokcore.{name}_{suffix}"


def test_main_prints_version_and_backends() -> None:
    out = run_python("import runpy; runpy.run_module('tokcore', run_name='__main__')")
    assert f"tokcore {tokcore.__version__}" in out
    assert "ids" in out


def test_public_names() -> None:
    for name in tokcore.__all__:
        assert hasattr(tokcore, name), name
    assert tokcore.pack_ids is tokcore.ids._pack.pack_ids


def _pure_copy(tmp_path: Path) -> Path:
    """The package as a pure wheel (or one whose extensions fail to load) installs it."""
    for source in (ROOT / "tokcore").rglob("*.py"):  # the root's modules and the wings'
        target = tmp_path / source.relative_to(ROOT)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(source.read_bytes())
    return tmp_path


def _import_copy(copy: Path, **env: str) -> subprocess.CompletedProcess[str]:
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    environ.update(env, PYTHONPATH=str(copy))
    return subprocess.run([sys.executable, "-c", "import tokcore; print(tokcore.BACKEND)"],
                          env=environ, capture_output=True, text=True, cwd=copy)


def test_missing_extensions_are_said_once(tmp_path: Path) -> None:
    """A compiled build (no pure marker) that lost its extensions warns, once."""
    done = _import_copy(_pure_copy(tmp_path))
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "python"
    assert done.stderr.count("RuntimeWarning") == 1
    assert "is not installed or does not load" in done.stderr
    assert "TOKCORE_NO_EXTENSIONS=1" in done.stderr
    assert _backend.RECOVERY in done.stderr.replace("\n", "")


def test_pure_twins_on_purpose_are_quiet(tmp_path: Path) -> None:
    done = _import_copy(_pure_copy(tmp_path), TOKCORE_NO_EXTENSIONS="1")
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "python", "")


def _pure_build(tmp_path: Path) -> Path:
    """The package as a pure build installs it: the Python twins and the build's marker."""
    copy = _pure_copy(tmp_path)
    (copy / "tokcore" / _backend.PURE_BUILD_MARKER).write_text(_backend.PURE_BUILD_TEXT)
    return copy


def test_a_pure_build_is_quiet_without_the_variable(tmp_path: Path) -> None:
    """TOKCORE_NO_EXTENSIONS=1 at build time is the choice: no warning at every import."""
    copy = _pure_build(tmp_path)
    done = _import_copy(copy)
    assert (done.returncode, done.stdout.strip(), done.stderr) == (0, "python", "")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    said = subprocess.run([sys.executable, "-W", "error", "-m", "tokcore"], cwd=copy,
                          env={**environ, "PYTHONPATH": str(copy)}, capture_output=True,
                          text=True, check=True).stdout
    assert "backend: python (a pure build: TOKCORE_NO_EXTENSIONS=1 at build time)" in said


def test_a_pure_build_is_refused_when_extensions_are_required(tmp_path: Path) -> None:
    done = _import_copy(_pure_build(tmp_path), TOKCORE_REQUIRE_EXTENSIONS="1")
    assert done.returncode == 1 and _backend.RECOVERY in done.stderr


@pytest.mark.parametrize("pure", [True, False], ids=["pure", "compiled"])
def test_the_build_records_a_pure_choice_only(tmp_path: Path, pure: bool) -> None:
    """setup.py's build_py puts the marker into a pure build's package, and takes a stale
    one out of a compiled build's (a build folder reused after a pure build)."""
    if PACKAGE_PARENT != ROOT:  # an unpacked sdist's suite against an installed wheel
        pytest.skip("the suite runs against an installed tokcore, not its build")
    marker = tmp_path / "tokcore" / _backend.PURE_BUILD_MARKER
    marker.parent.mkdir()
    marker.write_text("stale")
    environ = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    if pure:
        environ["TOKCORE_NO_EXTENSIONS"] = "1"
    subprocess.run([sys.executable, "setup.py", "-q", "build_py", "-d", str(tmp_path)],
                   cwd=ROOT, env=environ, capture_output=True, check=True)
    assert (tmp_path / "tokcore" / "ids" / "_pack_py.py").exists()  # the wings are packages
    assert marker.exists() == pure
    if pure:
        assert marker.read_text() == _backend.PURE_BUILD_TEXT


def test_required_extensions_missing_fail_the_import(tmp_path: Path) -> None:
    done = _import_copy(_pure_copy(tmp_path), TOKCORE_REQUIRE_EXTENSIONS="1")
    assert done.returncode == 1
    assert "ModuleNotFoundError: No module named 'tokcore." in done.stderr
    assert _backend.RECOVERY in done.stderr


# --- free-threaded builds -------------------------------------------------------------------

FREE_THREADED_BUILD = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


@pytest.mark.skipif(not FREE_THREADED_BUILD, reason="not a free-threaded build")
def test_compiled_twins_keep_the_gil_off() -> None:
    """Every compiled twin declares free-threading support: importing them all, in a fresh
    interpreter, leaves the GIL off (and says nothing)."""
    if _backend.NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the compiled twins are not under test")
    code = ("import sys, warnings; warnings.simplefilter('error'); import tokcore; "
            "print(tokcore.BACKEND, sys._is_gil_enabled())")
    assert run_python(code, TOKCORE_REQUIRE_EXTENSIONS="1") == "cython False"


@pytest.mark.skipif(_backend.NO_EXTENSIONS, reason="TOKCORE_NO_EXTENSIONS is set")
def test_a_twin_that_turns_the_gil_on_is_refused_when_required(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """A compiled twin built without free-threading support turns the GIL on when imported
    on a free-threaded build: under TOKCORE_REQUIRE_EXTENSIONS that fails the import."""
    states = iter([False, True])  # the GIL off before the import, on after it
    monkeypatch.setattr(_backend, "_gil_enabled", lambda: next(states))
    monkeypatch.setattr(_backend, "REQUIRE_EXTENSIONS", True)
    loaded = dict(_backend.LOADED)
    with pytest.raises(ImportError, match="turned the GIL on"):
        _backend.load_twin(tokcore.ids._pack.__name__)
    assert _backend.LOADED == loaded
