"""make test-draw runs every test whose work the draw sets, so CI can run the rest once.

CI runs ``make test`` (the quick draw) and then ``make test-draw`` (the full draw), which
selects hypothesis's tests by the marker its plugin gives them and the others that read
``_budget.QUICK`` by the ``draw`` marker. A test that reads ``QUICK`` without the marker
would run in CI on the quick draw only: this test finds any such one.
"""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def is_draw_mark(decorator: ast.expr) -> bool:
    """``@pytest.mark.draw``."""
    return (isinstance(decorator, ast.Attribute) and decorator.attr == "draw"
            and isinstance(decorator.value, ast.Attribute) and decorator.value.attr == "mark")


def unmarked_readers(source: str) -> list[str]:
    """The test functions of a module that read ``QUICK`` (themselves or through a helper of
    the module) and are not marked ``draw``."""
    tree = ast.parse(source)
    functions = {node.name: node for node in ast.walk(tree)
                 if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef)}

    def reads(name: str, seen: frozenset[str] = frozenset()) -> bool:
        names = {n.id for n in ast.walk(functions[name]) if isinstance(n, ast.Name)}
        return "QUICK" in names or any(
            reads(other, seen | {name}) for other in names & functions.keys() - seen - {name})

    return sorted(name for name, node in functions.items()
                  if name.startswith("test_") and reads(name)
                  and not any(is_draw_mark(d) for d in node.decorator_list))


def test_every_reader_of_quick_is_marked() -> None:
    found = {path.name: unmarked_readers(path.read_text(encoding="utf-8"))
             for path in sorted(TESTS.glob("test_*.py"))}
    assert {name: tests for name, tests in found.items() if tests} == {}


def test_the_check_sees_an_unmarked_reader() -> None:
    source = '''
import pytest
from _budget import QUICK

def helper():
    return 5 if QUICK else 6

@pytest.mark.draw
def test_marked():
    assert QUICK in (True, False)

def test_direct():
    assert QUICK in (True, False)

def test_through_a_helper():
    assert helper()

def test_plain():
    assert True
'''
    assert unmarked_readers(source) == ["test_direct", "test_through_a_helper"]
