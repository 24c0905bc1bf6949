from typing_extensions import disjoint_base

from ._args import Api, BytesLike
from ._sse_py import RelayCounts

BUILD_INFO: dict[str, str]
_SCANS: tuple[str, ...]

def _scan(name: str, data: bytes, simd: bool = True) -> int: ...

@disjoint_base
class UsageRelay:
    def __init__(self, prompt_tokens: int, cached_tokens: int | None = None, *,
                 api: Api = "chat", max_event_bytes: int = ...) -> None: ...
    @property
    def pending_bytes(self) -> int: ...
    @property
    def counts(self) -> RelayCounts: ...
    def feed(self, chunk: BytesLike) -> bytes: ...
    def close(self) -> bytes: ...
