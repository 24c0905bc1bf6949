"""tokcore's build backend: setuptools' own, asking for Cython only when it will run.

pyproject.toml names this module (``backend-path``). Every hook is setuptools.build_meta's;
two differ:

- ``get_requires_for_build_wheel`` / ``_editable`` add the ``Cython`` line of the ``build``
  dependency group, unless ``TOKCORE_NO_EXTENSIONS=1`` asks for the pure-Python twins: a pure
  build needs neither Cython nor a C compiler, online or off (``--no-build-isolation``).
- Importing it checks setuptools against the floor in ``[build-system] requires``, so an old
  one (offline, without isolation) gets a message that names the fix instead of a schema
  error about ``project.license``.

The environment rules (which variable, which values) are tokcore/_backend.py's, loaded by
path as setup.py does: the package itself is not importable here.
"""

from __future__ import annotations

import importlib.util
import re
import tomllib
from pathlib import Path
from typing import Any

import setuptools
from setuptools import build_meta as _setuptools
from setuptools.build_meta import *  # noqa: F403 (the hooks not redefined here)

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _load_env_rules() -> Any:
    spec = importlib.util.spec_from_file_location("_tokcore_env", ROOT / "tokcore" / "_backend.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


ENV = _load_env_rules()


def requirement(group: str, project: str) -> str:
    """The line for ``project`` in dependency group ``group`` of pyproject.toml."""
    for line in PYPROJECT["dependency-groups"][group]:
        if isinstance(line, str) and re.match(rf"{project}\b", line, flags=re.I):
            return line
    raise LookupError(f"pyproject.toml: no {project} in dependency group {group!r}")


def setuptools_floor() -> int:
    """The major version in ``setuptools>=N`` of ``[build-system] requires``."""
    line = next(r for r in PYPROJECT["build-system"]["requires"] if r.startswith("setuptools"))
    found = re.search(r">=\s*(\d+)", line)
    return int(found.group(1)) if found else 0


def _check_setuptools() -> None:
    have = setuptools.__version__
    major = int(re.match(r"\d+", have).group(0))  # type: ignore[union-attr]
    floor = setuptools_floor()
    if major < floor:
        raise SystemExit(
            f"tokcore: building needs setuptools>={floor} (it reads the SPDX license string "
            f"and license-files), this environment has {have}. Upgrade it "
            f"(pip install 'setuptools>={floor}'), or build with pip's default build "
            f"isolation, which installs it.")


_check_setuptools()


def extensions_wanted() -> bool:
    return not ENV.env_flag(ENV.NO_EXTENSIONS_VAR)


def _with_cython(requires: list[str]) -> list[str]:
    return [*requires, requirement("build", "Cython")] if extensions_wanted() else requires


def get_requires_for_build_wheel(config_settings: dict[str, Any] | None = None) -> list[str]:
    return _with_cython(_setuptools.get_requires_for_build_wheel(config_settings))


def get_requires_for_build_editable(config_settings: dict[str, Any] | None = None) -> list[str]:
    return _with_cython(_setuptools.get_requires_for_build_editable(config_settings))
