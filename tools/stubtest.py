"""mypy's stubtest on every compiled twin's stub (``tokcore/**/_*_c.pyi``) against the
compiled module (make build first): a lint hook of .pre-commit-config.yaml, so a new twin is
checked without a list to edit. Missing stubs are ignored (the dispatchers' private names);
tests/typing/stubtest-allowlist.txt has the allowed differences."""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
modules = sorted(".".join(stub.relative_to(ROOT).with_suffix("").parts)
                 for stub in (ROOT / "tokcore").rglob("_*_c.pyi"))
if not modules:
    sys.exit("stubtest: no compiled twin's stub under tokcore/")
os.chdir(ROOT)
os.execv(sys.executable, [sys.executable, "-m", "mypy.stubtest", "--ignore-missing-stub",
                          "--allowlist", "tests/typing/stubtest-allowlist.txt", *modules])
