from .._args import BytesLike
from ._pack_py import IdsArg

BUILD_INFO: dict[str, str]

def pack_ids(ids: IdsArg) -> bytes: ...
def unpack_ids(data: BytesLike) -> list[int]: ...
