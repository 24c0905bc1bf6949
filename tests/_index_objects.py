"""Objects that are not ints but usable as ids through ``__index__``, shared by the tests."""

from __future__ import annotations

from typing import Any


class Index:
    """Not an int, but usable as one."""

    def __init__(self, value: int) -> None:
        self.value = value

    def __index__(self) -> int:
        return self.value


class Resizer:
    """An ``__index__`` that empties the list being read, or grows it (which moves its
    storage), then returns 1."""

    def __init__(self, victim: list[Any], grow: bool) -> None:
        self.victim, self.grow = victim, grow

    def __index__(self) -> int:
        if self.grow:
            self.victim.extend(range(10_000))
        else:
            self.victim.clear()
        return 1
