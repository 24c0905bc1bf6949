"""Twin lookup for the reliability tests (leaks, threads, hostile input, fuzz corpus).

These tests cover every hot path; a hot path whose Python twin is not in the tree yet (it
lands from another branch) is skipped with that reason. Once its ``_py`` twin is there, a
missing or broken Cython twin fails, as everywhere else.
"""

from __future__ import annotations

import importlib
from pathlib import Path
from types import ModuleType

import pytest

from tokcore._backend import NO_EXTENSIONS

PACKAGE = Path(__file__).resolve().parent.parent / "tokcore"
KINDS = ("c", "py")


def landed(name: str) -> bool:
    return (PACKAGE / f"_{name}_py.py").exists()


def twin(name: str, kind: str) -> ModuleType:
    """``tokcore._<name>_<kind>``; skips only for a hot path not in the tree or NO_EXTENSIONS."""
    if not landed(name):
        pytest.skip(f"tokcore/_{name}_py.py is not in this tree")
    if kind == "c" and NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    return importlib.import_module(f"tokcore._{name}_{kind}")


def twins(name: str) -> list[ModuleType]:
    """Every twin of ``name`` under test (the Python one alone without extensions)."""
    return [twin(name, "py")] + ([] if NO_EXTENSIONS else [twin(name, "c")])


_printed: dict[str, int] = {}


def report(config: pytest.Config, filename: str, header: str, lines: list[str]) -> None:
    """Print the figures measured since the last call (capture off) and keep all of them in
    build/<filename> (``-python-only`` added to the name under TOKCORE_NO_EXTENSIONS).

    ``lines`` is a list that lives as long as the session: pytest may tear a module's
    fixtures down more than once when parametrised session fixtures reorder its tests.
    """
    if NO_EXTENSIONS:
        filename = filename.replace(".txt", "-python-only.txt")
    new = lines[_printed.get(filename, 0):]
    _printed[filename] = len(lines)
    if not new:
        return
    path = PACKAGE.parent / "build" / filename
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join([header, *lines]) + "\n")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in (header, *new):
                reporter.write_line(line)
