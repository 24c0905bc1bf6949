"""The build tooling's own logic: what the Makefile and CI scripts rely on."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(sys.version_info < (3, 11), reason="tomllib is the oracle")
def test_extras_fallback_parser_matches_tomllib() -> None:
    """Pythons before 3.11 (the CPython matrix) read pyproject's extras by hand."""
    import tomllib

    spec = importlib.util.spec_from_file_location("extra_requirements",
                                                  ROOT / "tools" / "extra_requirements.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    expected = tomllib.loads(text)["project"]["optional-dependencies"]
    assert module.parse_extras(text) == expected
    assert "test" in expected and len(expected["test"]) > 3
