# The Cython twin's methods are cdef (the relay cimports them); Python sees the class only.
from typing_extensions import disjoint_base

from ._usage_py import Rules

@disjoint_base
class BigEvent:
    def __init__(self, rules: Rules, max_bytes: int, bom: bool) -> None: ...
