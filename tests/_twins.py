"""Twin lookup for every test: the conftest fixtures and the reliability tests.

A missing or broken Cython twin fails the tests; only an explicit TOKCORE_NO_EXTENSIONS run
leaves the Cython twins out, and pytest reports those tests as skipped.
"""

from __future__ import annotations

import importlib
import os
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from tokcore._backend import NO_EXTENSIONS

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("c", "py")
#: TOKCORE_TEST_TWINS=c runs the Cython twins' tests alone (make sanitize: the Python twins
#: have no C to instrument); =dispatch deselects the twin-fixture tests of both kinds (make
#: test's pure run: the other run has just run them), and the tests that take twins in their
#: body (twin, twins) run on the Python twin.
ONLY = tuple(os.environ.get("TOKCORE_TEST_TWINS", "").replace(",", " ").split()) or KINDS

#: make test-freethreaded runs some files under pytest-run-parallel, each test in 4 threads at
#: once. Tests whose parameters include a memoryview made at import share that one object
#: between the threads, and CPython 3.13t's memoryview counts its exports without atomics:
#: a view made of a shared memoryview can release it for every thread (the stdlib's
#: base64.b64decode fails the same way on it). Such tests run in one thread there.
SHARED_VIEW = pytest.mark.thread_unsafe(
    reason="a memoryview parameter shared by the threads (3.13t's memoryview export race)")
#: tests that switch a Cython twin's kernels, which are process-wide: threads that save and
#: restore them at once can leave another kernel in use
SWITCHES_KERNELS = pytest.mark.thread_unsafe(reason="switches the process-wide kernels")

#: each hot path's dispatcher module: its twins are that name + "_c" and + "_py"
HOT_PATHS = {
    "pack": "tokcore.ids._pack",
    "b64": "tokcore.ids._b64",
    "wire": "tokcore.ids._wire",
    "members": "tokcore.members._members",
    "usage": "tokcore.stream._usage",
    "relay": "tokcore.stream._relay",
    "events": "tokcore.stream._events",
    "bigevent": "tokcore.stream._bigevent",
    "writer": "tokcore.writer._writer",
    "lazy": "tokcore.pickling._lazy",
}
#: the stream API of one kind is three hot paths: usage rewrite, relay, event decoder
GROUPS = {"stream": ("usage", "relay", "events")}


def twin(name: str, kind: str) -> Any:
    """The ``kind`` twin of hot path ``name`` (``HOT_PATHS``); the Cython twin is skipped only
    under NO_EXTENSIONS.

    ``"stream"`` is the public names of the ``_usage``, ``_relay`` and ``_events`` twins of
    that kind together, for tests that use the whole stream API at once.
    """
    if kind == "c" and NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    if kind not in ONLY and not (kind == "py" and ONLY == ("dispatch",)):
        pytest.skip(f"TOKCORE_TEST_TWINS={','.join(ONLY)}: the {kind} twins are not under test")
    if name in GROUPS:
        names: dict[str, Any] = {}
        for part in GROUPS[name]:
            module = importlib.import_module(f"{HOT_PATHS[part]}_{kind}")
            names.update((k, v) for k, v in vars(module).items() if not k.startswith("_"))
        names["__name__"] = f"tokcore.{name}_{kind}"
        return SimpleNamespace(**names)
    return importlib.import_module(f"{HOT_PATHS[name]}_{kind}")


def twins(name: str) -> list[Any]:
    """Every twin of ``name`` under test (the Python one alone without extensions). A test
    that walks this list in its body is not a twin-fixture test, so a ``dispatch`` run keeps
    it, on the Python twin."""
    only = ("py",) if ONLY == ("dispatch",) else ONLY
    kinds = [kind for kind in ("py", "c") if kind in only and not (kind == "c" and NO_EXTENSIONS)]
    return [twin(name, kind) for kind in kinds]


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
    path = ROOT / "build" / filename
    path.parent.mkdir(exist_ok=True)
    path.write_text("\n".join([header, *lines]) + "\n")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    capture = config.pluginmanager.getplugin("capturemanager")
    if reporter is not None and capture is not None:
        with capture.global_and_fixture_disabled():
            reporter.write_line("")
            for line in (header, *new):
                reporter.write_line(line)
