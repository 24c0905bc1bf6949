"""Which twin each hot path runs.

The environment is read once, at import. ``setup.py`` loads this file by path to apply the
same rules at build time, so it must not import anything from the package.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType

NO_EXTENSIONS_VAR = "TOKCORE_NO_EXTENSIONS"
REQUIRE_EXTENSIONS_VAR = "TOKCORE_REQUIRE_EXTENSIONS"


def env_flag(name: str) -> bool:
    """A flag is on when the variable is set to anything but ``""`` or ``"0"``."""
    return os.environ.get(name, "") not in ("", "0")


NO_EXTENSIONS = env_flag(NO_EXTENSIONS_VAR)
REQUIRE_EXTENSIONS = env_flag(REQUIRE_EXTENSIONS_VAR) and not NO_EXTENSIONS

#: hot path name ("ids", "b64", "json", "usage", "sse", "events") -> "cython" or "python"
LOADED: dict[str, str] = {}
#: hot path name -> the loaded module, for ``python -m tokcore``
MODULES: dict[str, ModuleType] = {}


def load_twin(name: str) -> ModuleType:
    """Import ``tokcore._<name>_c``, or ``tokcore._<name>_py`` when that is not possible."""
    if not NO_EXTENSIONS:
        try:
            module = importlib.import_module(f"tokcore._{name}_c")
        except ImportError:
            if REQUIRE_EXTENSIONS:
                raise
        else:
            LOADED[name], MODULES[name] = "cython", module
            return module
    module = importlib.import_module(f"tokcore._{name}_py")
    LOADED[name], MODULES[name] = "python", module
    return module


def backend_summary() -> str:
    """``"cython"`` or ``"python"`` when every hot path agrees, else ``"mixed"``."""
    kinds = set(LOADED.values())
    return kinds.pop() if len(kinds) == 1 else "mixed"
