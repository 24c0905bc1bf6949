"""The README's interactive examples run as written (on whichever twin is live).

Exception messages are not compared: some of the stdlib's differ between Python versions.
"""

from __future__ import annotations

import doctest
from pathlib import Path

README = Path(__file__).resolve().parent.parent / "README.md"


def test_readme_examples() -> None:
    flags = doctest.ELLIPSIS | doctest.IGNORE_EXCEPTION_DETAIL
    result = doctest.testfile(str(README), module_relative=False, optionflags=flags)
    assert result.attempted > 0
    assert result.failed == 0
