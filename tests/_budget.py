"""How many examples a property draws: the full number, or a few under TOKCORE_TEST_QUICK=1
(the CPython matrix and the emulated aarch64 job, where every test runs but draws less)."""

from __future__ import annotations

from tokcore._backend import env_flag

QUICK = env_flag("TOKCORE_TEST_QUICK")
QUICK_EXAMPLES = 20


def examples(wanted: int) -> int:
    """``max_examples`` for a property that wants ``wanted`` in a full run."""
    return min(wanted, QUICK_EXAMPLES) if QUICK else wanted
