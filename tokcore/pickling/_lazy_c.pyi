from collections.abc import Callable
from typing import Any

from typing_extensions import disjoint_base

# The descriptor methods are slots in the Cython twin: positional-only.
@disjoint_base
class LazyAttr:
    name: str
    default: Any
    held_type: type
    on_held: Callable[[dict[Any, Any], str, Any], Any]
    def __init__(self, name: str, default: Any, held_type: type,
                 on_held: Callable[[dict[Any, Any], str, Any], Any]) -> None: ...
    def __get__(self, obj: Any, owner: Any = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...
    def __delete__(self, obj: Any, /) -> None: ...

@disjoint_base
class LazySlot:
    name: str
    member: Any
    held_type: type
    on_held: Callable[[Any, Any, Any], Any]
    def __init__(self, name: str, member: Any, held_type: type,
                 on_held: Callable[[Any, Any, Any], Any]) -> None: ...
    def __get__(self, obj: Any, owner: Any = None, /) -> Any: ...
    def __set__(self, obj: Any, value: Any, /) -> None: ...
    def __delete__(self, obj: Any, /) -> None: ...
