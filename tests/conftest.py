"""Twin fixtures: every hot-path test runs against the Cython and the Python twin.

The Cython twin is imported directly, so a broken build fails the tests. Only an explicit
TOKCORE_NO_EXTENSIONS run leaves it out, and pytest reports those tests as skipped.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from types import ModuleType
from typing import Any

import pytest
from _budget import FULL_EXAMPLES, PROFILE, QUICK_EXAMPLES
from _twins import KINDS, ONLY, twin
from hypothesis import HealthCheck, settings

# A shared 2-core machine makes per-example timings meaningless: no deadline, and no
# too_slow health check (data generation timed on a loaded machine). The profile is
# TOKCORE_TEST_PROFILE's (tests/_budget.py): quick by default, full in make test-full (CI:
# make test-draw); every test runs in both. Tests that set their own max_examples take them through
# _budget.examples, which applies the same cap.
_UNTIMED = {"deadline": None, "suppress_health_check": [HealthCheck.too_slow]}
settings.register_profile("full", max_examples=FULL_EXAMPLES, **_UNTIMED)
settings.register_profile("quick", max_examples=QUICK_EXAMPLES, **_UNTIMED)
settings.load_profile(PROFILE)

#: The tests of the repository's text, not of the code: the README's and the docs' code blocks, the
#: Makefile and the contributing pages, the commit subjects, the import layout, the draw markers,
#: DESIGN.md's claims. CI's jobs that build or run the code in another way (sanitizers, the Cython
#: floor, free-threaded, tools/*.sh) set TOKCORE_TEST_CODE_ONLY=1 and leave them to make test: none
#: of them can fail there and not in make test but through the code (the docs' blocks call the
#: public API as the unit tests do, on inputs the unit tests cover), so .ci/run's record of those
#: jobs' passes need not read the docs (.ci/run: READS).
REPOSITORY_TESTS = ["test_docs.py", "test_readme.py", "test_tools.py", "test_hygiene.py",
                    "test_layout.py", "test_draw.py", "test_design.py"]
collect_ignore = REPOSITORY_TESTS if os.environ.get("TOKCORE_TEST_CODE_ONLY") else []

TWIN_FIXTURES: set[str] = set()


def twin_fixture(name: str) -> Callable[..., Any]:
    """The fixture ``<name>_twin``: ``tokcore._<name>_c`` or ``tokcore._<name>_py`` (for a
    group such as ``stream``, its modules of that kind as one namespace). Session scope
    makes it usable under ``@given``."""
    def fixture(request: pytest.FixtureRequest) -> Any:
        return twin(name, request.param)
    fixture.__doc__ = f"The {name} twin of each kind ({', '.join(KINDS)})."
    TWIN_FIXTURES.add(f"{name}_twin")
    return pytest.fixture(params=KINDS, scope="session", name=f"{name}_twin")(fixture)


pack_twin = twin_fixture("pack")  # pack_ids, unpack_ids
b64_twin = twin_fixture("b64")  # base64 drop-ins, ids_to_b64, b64_to_ids
members_twin = twin_fixture("members")  # find_member, set_member, del_member
usage_twin = twin_fixture("usage")  # find_usage, rewrite_usage
relay_twin = twin_fixture("relay")  # UsageRelay
events_twin = twin_fixture("events")  # EventDecoder, iter_events
stream_twin = twin_fixture("stream")  # the last three of one kind together
wire_twin = twin_fixture("wire")  # ids_to_json, json_to_ids, ids_to_msgpack, ...
writer_twin = twin_fixture("writer")  # StreamWriter


@pytest.fixture(scope="session")
def pack_pair() -> tuple[ModuleType, ModuleType]:
    """``(tokcore.ids._pack_c, tokcore.ids._pack_py)``, for parity checks."""
    return twin("pack", "c"), twin("pack", "py")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """TOKCORE_TEST_TWINS (tests/_twins.py): deselect the twin-fixture tests of the kinds not
    under test, rather than report thousands of skips. A ``kind`` parameter of "c" or "py"
    (``parametrize("kind", KINDS)``, then ``twin(name, kind)``) counts as a twin fixture.
    A test of the Python twins alone is marked ``python_twin`` (a selection can leave some
    of them out: the CPython matrix their memory measures)."""
    keep: list[pytest.Item] = []
    dropped: list[pytest.Item] = []
    for item in items:
        params = getattr(getattr(item, "callspec", None), "params", {})
        kinds = {params[name] for name in TWIN_FIXTURES if name in params}
        if params.get("kind") in KINDS:
            kinds.add(params["kind"])
        if kinds == {"py"}:
            item.add_marker("python_twin")
        (dropped if kinds - set(ONLY) else keep).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = keep
