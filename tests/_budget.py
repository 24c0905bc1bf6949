"""How much a property draws: TOKCORE_TEST_PROFILE=quick (the default: make test, the
contributor's loop, the CPython matrix, the emulated aarch64 job) or full (make test-full, and
make test-draw in CI on the venv's Python). Every test runs in both; quick draws fewer examples."""

from __future__ import annotations

import os

PROFILES = ("quick", "full")
PROFILE = os.environ.get("TOKCORE_TEST_PROFILE") or "quick"
if PROFILE not in PROFILES:
    raise ValueError(f"TOKCORE_TEST_PROFILE={PROFILE!r}: expected one of {PROFILES}")
QUICK = PROFILE == "quick"
QUICK_EXAMPLES = 20
FULL_EXAMPLES = 150


def examples(wanted: int) -> int:
    """``max_examples`` for a property that wants ``wanted`` in a full run."""
    return min(wanted, QUICK_EXAMPLES) if QUICK else wanted
