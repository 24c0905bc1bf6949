"""Print the requirements of one optional-dependency extra of pyproject.toml, one a line.

Used by the Makefile to install an extra without installing the package itself (the tests
import the in-place build). tomllib is 3.11+; older Pythons get a parse of the one table.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"


def parse_extras(text: str) -> dict[str, list[str]]:
    """The optional-dependency table without tomllib (Python < 3.11): our table is
    `name = [...]` arrays of strings, one or several lines each, with comments between."""
    table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
    table = re.sub(r"(?m)^\s*#.*$", "", table)
    # each array ends at the first "]" outside a string (extras like "x[y]" are inside)
    array = r'\[(?:[^\]"]|"[^"]*")*\]'
    found = re.findall(rf"^(\w+)\s*=\s*({array})", table, flags=re.M)
    return {name: ast.literal_eval(value) for name, value in found}


def extras() -> dict[str, list[str]]:
    text = PYPROJECT.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:
        return parse_extras(text)
    return dict(tomllib.loads(text)["project"]["optional-dependencies"])


if __name__ == "__main__":
    print("\n".join(extras()[sys.argv[1]]))
