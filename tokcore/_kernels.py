"""The kernel vocabulary of the compiled twins: one set of names for every hot path.

A compiled twin with kernels (base64, the wire formats, the object-text check, the relay's
byte scan) answers ``_kernels()`` (what it can run on this machine, plainest first),
``_kernel()`` (the one in use) and ``_use_kernel(name)`` (switch to it, for the tests and the
benchmarks; returns the name in use before). Each name says the instructions a kernel is
written in, whatever it computes; ``python -m tokcore`` prints each twin's.
"""

from __future__ import annotations

#: every kernel name, plainest first: byte by byte, eight bytes in a word, the 16-byte
#: vectors of x86-64 and aarch64, AVX2's 32 bytes, AVX-512's 64 (each twin says which
#: AVX-512 subsets its kernel needs: VBMI for base64, BW for the object check)
KERNELS = ("scalar", "swar", "sse2", "neon", "avx2", "avx512")


def unknown_kernel(name: object, available: tuple[str, ...]) -> ValueError | TypeError:
    """The error of ``_use_kernel(name)`` for a name this twin cannot run here."""
    if not isinstance(name, str):
        return TypeError(f"a kernel is named by a str, not {type(name).__name__}")
    where = "" if name in KERNELS else " (not a kernel name)"
    return ValueError(f"no kernel {name!r} here{where}: this twin has {', '.join(available)}")


#: the hot paths whose compiled twin has kernels, by the name python -m tokcore gives them
#: (the keys of ``_backend.MODULES``)
WITH_KERNELS = {"b64": "ids._b64", "wire": "ids._wire", "object check": "members._members",
                "byte scan": "stream._relay", "string escape": "writer._writer"}


def kernels_in_use() -> dict[str, tuple[str, tuple[str, ...]]]:
    """What each loaded compiled twin runs: {name: (kernel in use, the twin's kernels)}.
    Empty for the Python twins, which have none."""
    from ._backend import MODULES

    found = {}
    for name, module_name in WITH_KERNELS.items():
        module = MODULES.get(module_name)
        if module is not None and hasattr(module, "_kernels"):
            found[name] = (module._kernel(), module._kernels())
    return found
