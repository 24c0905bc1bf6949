# The Cython twin's methods are cdef (the relay cimports them); Python sees the class only.
from ._usage_py import Rules

class BigEvent:
    def __init__(self, rules: Rules, max_bytes: int, bom: bool) -> None: ...
