"""Replay every kept fuzz input (seeds and past findings) through its harness.

Each harness (fuzz/fuzz_<name>.py) runs both twins on the input and checks their parity and
the contract; an input that once found a bug stays in fuzz/corpus/<name>/ for good, so the
bug cannot come back unnoticed. Under TOKCORE_NO_EXTENSIONS only the Python twin runs (the
oracle checks still apply).
"""

from __future__ import annotations

import importlib
import sys
from pathlib import Path
from types import ModuleType

import pytest

FUZZ_DIR = Path(__file__).resolve().parent.parent / "fuzz"
sys.path.insert(0, str(FUZZ_DIR))

import _parity  # noqa: E402  (lives in fuzz/)

HARNESSES = sorted(p.stem.removeprefix("fuzz_") for p in FUZZ_DIR.glob("fuzz_*.py"))
OPEN = {name: _parity.open_findings(name) for name in HARNESSES}
KEPT = [pytest.param(name, path, id=f"{name}/{path.name[:20]}", marks=[pytest.mark.xfail(
            raises=_parity.Finding, strict=True,
            reason=f"open finding (fuzz/corpus/open.txt): {OPEN[name][path.name]}")]
        if path.name in OPEN[name] else []) for name in HARNESSES
        for path in _parity.kept_inputs(name)]


def harness(name: str) -> ModuleType:
    return importlib.import_module(f"fuzz_{name}")


def test_there_are_harnesses_and_kept_inputs() -> None:
    assert "ids" in HARNESSES
    assert KEPT, "fuzz/seeds and fuzz/corpus hold no input at all"


@pytest.mark.parametrize("name", HARNESSES)
def test_harness_runs_on_empty_and_tiny_inputs(name: str) -> None:
    for data in (b"", b"\0", b"\xff" * 3, bytes(range(256))):
        harness(name).test_one_input(data)


@pytest.mark.parametrize("name, path", KEPT)
def test_kept_input_replays_clean(name: str, path: Path) -> None:
    """Every kept input passes; one listed as an open finding fails with its message."""
    try:
        harness(name).test_one_input(path.read_bytes())
    except _parity.Finding as exc:
        prefix = OPEN[name].get(path.name)
        assert prefix is None or str(exc).startswith(prefix), \
            f"{path.name} fails otherwise than its open finding ({prefix}): {exc}"
        raise


def test_open_findings_are_kept() -> None:
    """Each line of fuzz/corpus/open.txt names a kept input of its harness."""
    for name, findings in OPEN.items():
        for kept in findings:
            assert (_parity.CORPUS_DIR / name / kept).is_file(), f"{name}/{kept} is not kept"


def test_parity_check_catches_a_difference() -> None:
    """The comparison the harnesses rely on does flag differing twins and foreign errors."""
    twins = {"c": ModuleType("c"), "py": ModuleType("py")}
    twins["c"].f = lambda: b"x"  # type: ignore[attr-defined]
    twins["py"].f = lambda: bytearray(b"x")  # type: ignore[attr-defined]
    with pytest.raises(_parity.Finding, match="twins differ"):
        _parity.same_outcome(twins, lambda t: t.f(), (ValueError,), "f")
    twins["py"].f = twins["c"].f = lambda: {}[0]  # type: ignore[attr-defined]
    with pytest.raises(_parity.Finding, match="outside the contract"):
        _parity.same_outcome(twins, lambda t: t.f(), (ValueError,), "f")


def test_usage_oracle_agrees_with_the_tests_oracle() -> None:
    """fuzz/_oracles.py's dialect rules (written apart, from docs/dialects.md's table) and
    tests/_usage.py's expected_usage agree on usage objects of every shape."""
    import itertools

    import _oracles
    from _usage import expected_usage

    counts: list[object] = [None, 0, 7, -3, 10**18 - 1, 10**18, -(10**18), 1.5, "2", True]
    details: list[object] = [None, {}, {"cached_tokens": 1, "x": 2}, [], 3]
    shapes = [{}, {"x": 1}]
    for rules in _oracles.DIALECTS.values():
        for output, detail in itertools.product(counts, details):
            shapes.append({rules.output_key: output, "x": [1]})
            shapes.append({"a": 1, rules.prompt_key: output, rules.output_key: output,
                           **({rules.details_key: detail} if rules.details_key else {})})
            shapes.append({rules.prompt_key: 1, "total_tokens": 9, rules.cached_key: detail})
    for api, usage, prompt, cached in itertools.product(
            _oracles.APIS, shapes, [0, 12_345, 2**63 - 1], [None, 0, 5]):
        ours = _oracles.rewritten_usage(usage, prompt, cached, api)
        theirs = expected_usage(usage, prompt, cached, api)
        assert (ours is None) == (theirs is None) and (
            ours is None or _oracles.same_json(ours, theirs)), (api, usage, prompt, cached)
