"""pytest plugin of tools/freethreaded.sh: the run fails if the GIL is on, at its start or at
its end (a module that does not declare free-threading support turns it on when imported).

Loaded with ``-p pytest_gil_off`` and ``tools`` on ``PYTHONPATH``, on a free-threaded build.
"""

from __future__ import annotations

import sys

import pytest


def _gil_enabled() -> bool:
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return is_gil_enabled is None or bool(is_gil_enabled())


def pytest_sessionstart(session: pytest.Session) -> None:
    if _gil_enabled():
        raise pytest.UsageError("the GIL is on: this run is for a free-threaded build, GIL off")


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    if _gil_enabled():
        sys.stderr.write("\npytest_gil_off: the GIL was turned on during the run\n")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


def pytest_report_header() -> str:
    return f"GIL: {'on' if _gil_enabled() else 'off'} ({sys.version.split()[0]})"
