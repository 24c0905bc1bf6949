from collections.abc import Iterable, Iterator

from typing_extensions import disjoint_base

from .._args import BytesLike
from ._events_py import Event

@disjoint_base
class EventDecoder:
    def __init__(self, *, max_event_bytes: int = ...) -> None: ...
    @property
    def pending_bytes(self) -> int: ...
    def feed(self, chunk: BytesLike) -> list[Event]: ...
    def close(self) -> list[Event]: ...

def iter_events(chunks: Iterable[BytesLike], *,
                max_event_bytes: int = ...) -> Iterator[Event]: ...
