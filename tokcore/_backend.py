"""Which twin each hot path runs.

The environment is read once, at import. ``setup.py`` loads this file by path to apply the
same rules at build time, so it must not import anything from the package.
"""

from __future__ import annotations

import importlib
import os
import sys
import warnings
from types import ModuleType

NO_EXTENSIONS_VAR = "TOKCORE_NO_EXTENSIONS"
REQUIRE_EXTENSIONS_VAR = "TOKCORE_REQUIRE_EXTENSIONS"
#: the file a pure build (``TOKCORE_NO_EXTENSIONS=1`` at build time) puts in the package
#: (setup.py's build_py): the pure twins were chosen, so their import says nothing
PURE_BUILD_MARKER = "_pure_build.txt"
PURE_BUILD_TEXT = (
    "tokcore was built with TOKCORE_NO_EXTENSIONS=1: the pure-Python twins, on purpose.\n"
    "tokcore._backend reads this file: their import is quiet.\n"
)


def env_flag(name: str) -> bool:
    """A flag is on when the variable is set to anything but ``""`` or ``"0"``."""
    return os.environ.get(name, "") not in ("", "0")


def _pure_build() -> bool:
    """The package was built pure: its marker is beside this file (never in a source tree,
    whose in-place build is a compiled one, nor in a compiled wheel)."""
    return os.path.exists(os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                       PURE_BUILD_MARKER))


#: the build's choice: "pure" (built with TOKCORE_NO_EXTENSIONS=1) or "compiled" (a compiled
#: wheel, or a source tree)
BUILD = "pure" if _pure_build() else "compiled"
NO_EXTENSIONS = env_flag(NO_EXTENSIONS_VAR)
REQUIRE_EXTENSIONS = env_flag(REQUIRE_EXTENSIONS_VAR) and not NO_EXTENSIONS

#: hot path -> "cython" or "python"; a hot path is named by its dispatcher's module under the
#: package ("ids._pack", "stream._relay"), whose twins are that name + "_c" and + "_py"
LOADED: dict[str, str] = {}
#: hot path -> the loaded twin, for ``python -m tokcore``
MODULES: dict[str, ModuleType] = {}


#: how a pure wheel reused from pip's wheel cache is replaced by a compiled one: pip keys its
#: cache by the sdist alone, so the wheel a TOKCORE_NO_EXTENSIONS=1 build left there is
#: reused by every later install of that sdist until it is removed (README: Install)
RECOVERY = "pip cache remove tokcore && pip install --force-reinstall --no-deps tokcore"
#: said once a process when a compiled twin is missing and nobody asked for the pure ones
MISSING_WARNING = (
    "tokcore: the compiled extension {module} is not installed or does not load ({error}); "
    "its pure-Python twin runs instead, several times slower. Set "
    f"{NO_EXTENSIONS_VAR}=1 to choose the pure twins on purpose (and silence this), or "
    f"reinstall the compiled build (a C compiler present): {RECOVERY}"
)
_warned = False


def _missing(module: str, error: ImportError) -> None:
    """A compiled build that lost its extensions never goes unnoticed (an install with no
    compiler and no TOKCORE_NO_EXTENSIONS fails; a copy without its ``.so`` files is said
    here). A pure build chose its twins: it says nothing."""
    global _warned
    if not _warned and BUILD == "compiled":
        _warned = True
        warnings.warn(MISSING_WARNING.format(module=module, error=error), RuntimeWarning,
                      stacklevel=4)


def _gil_enabled() -> bool:
    """Whether the GIL is on (always, on a build that has one)."""
    is_gil_enabled = getattr(sys, "_is_gil_enabled", None)
    return is_gil_enabled is None or bool(is_gil_enabled())


def load_twin(dispatcher: str) -> ModuleType:
    """Import the twins of the dispatcher module ``dispatcher`` (its ``__name__``, such as
    ``"tokcore.ids._pack"``): ``<dispatcher>_c``, or ``<dispatcher>_py`` when that is not
    possible.

    The compiled twins declare free-threading support: on a free-threaded build they load
    with the GIL off (``PYTHON_GIL=0`` or not). One that turns the GIL back on is a build
    from older sources; CPython warns, and ``TOKCORE_REQUIRE_EXTENSIONS`` makes it an error.
    """
    name = dispatcher.removeprefix("tokcore.")
    if not NO_EXTENSIONS and (BUILD == "compiled" or REQUIRE_EXTENSIONS):
        gil_before = _gil_enabled()
        compiled = f"{dispatcher}_c"
        try:
            module = importlib.import_module(compiled)
            if REQUIRE_EXTENSIONS and not gil_before and _gil_enabled():
                raise ImportError(
                    f"{compiled} turned the GIL on: it was built without free-threading "
                    "support (rebuild it from these sources)")
        except ImportError as exc:
            if REQUIRE_EXTENSIONS:
                raise ImportError(
                    f"tokcore: {REQUIRE_EXTENSIONS_VAR}=1 is set and {compiled} does not "
                    f"load ({exc}); to reinstall the compiled build: {RECOVERY}") from exc
            _missing(compiled, exc)
        else:
            LOADED[name], MODULES[name] = "cython", module
            return module
    module = importlib.import_module(f"{dispatcher}_py")
    LOADED[name], MODULES[name] = "python", module
    return module


def backend_summary() -> str:
    """``"cython"`` or ``"python"`` when every hot path agrees, else ``"mixed"``."""
    kinds = set(LOADED.values())
    return kinds.pop() if len(kinds) == 1 else "mixed"
