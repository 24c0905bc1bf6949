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


def extras() -> dict[str, list[str]]:
    text = PYPROJECT.read_text(encoding="utf-8")
    try:
        import tomllib
    except ImportError:  # Python < 3.11: our table is one `name = [...]` a line
        table = text.split("[project.optional-dependencies]", 1)[1].split("\n[", 1)[0]
        found = re.findall(r"^(\w+)\s*=\s*(\[.*\])\s*$", table, flags=re.M)
        return {name: ast.literal_eval(value) for name, value in found}
    return dict(tomllib.loads(text)["project"]["optional-dependencies"])


if __name__ == "__main__":
    print("\n".join(extras()[sys.argv[1]]))
