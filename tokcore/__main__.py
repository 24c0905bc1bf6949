"""``python -m tokcore``: the version, each hot path's live twin, and what its build uses."""

from __future__ import annotations

import platform
import sys

from . import BACKEND, __version__
from ._backend import BUILD, LOADED, MODULES, NO_EXTENSIONS, REQUIRE_EXTENSIONS
from ._kernels import WITH_KERNELS, kernels_in_use


def describe() -> str:
    lines = [
        f"tokcore {__version__} on {platform.python_implementation()} "
        f"{platform.python_version()} ({platform.machine()}, {sys.byteorder}-endian)",
        f"backend: {BACKEND}"
        + (" (TOKCORE_NO_EXTENSIONS)" if NO_EXTENSIONS else "")
        + (" (TOKCORE_REQUIRE_EXTENSIONS)" if REQUIRE_EXTENSIONS else "")
        + (" (a pure build: TOKCORE_NO_EXTENSIONS=1 at build time)" if BUILD == "pure"
           else ""),
    ]
    kernels = {WITH_KERNELS[name]: kernel for name, kernel in kernels_in_use().items()}
    for name, kind in sorted(LOADED.items()):
        info = dict(getattr(MODULES[name], "BUILD_INFO", {}))
        if name in kernels:
            kernel, available = kernels[name]
            info = {"kernel": f"{kernel} (of {', '.join(available)})", **info}
        details = ", ".join(f"{key}: {value}" for key, value in info.items())
        lines.append(f"  {name:<16} {kind:<7} {details}".rstrip())
    return "\n".join(lines)


if __name__ == "__main__":
    print(describe())
