"""The README's interactive examples run as written (on whichever twin is live).

Exception messages are not compared: some of the stdlib's differ between Python versions.
The examples' names live in a module of their own, so that the class they define pickles.
This file needs nothing but the package (the sdist's quick check runs it); the README's other
blocks, and the documentation's, are run by tests/test_docs.py.
"""

from __future__ import annotations

import doctest
import sys
from pathlib import Path
from types import ModuleType

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples() -> None:
    text = README.read_text(encoding="utf-8")
    test = doctest.DocTestParser().get_doctest(text, {}, "README.md", str(README), 0)
    module = ModuleType("readme_examples")
    test.globs = module.__dict__
    sys.modules[module.__name__] = module
    try:
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS
                                       | doctest.IGNORE_EXCEPTION_DETAIL)
        result = runner.run(test, clear_globs=False)
    finally:
        del sys.modules[module.__name__]
    assert result.attempted > 0
    assert result.failed == 0
