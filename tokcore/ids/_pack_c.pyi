from .._args import BytesLike
from ._pack_py import IdsArg
from ._width import Width

BUILD_INFO: dict[str, str]

def pack_ids(ids: IdsArg, *, width: Width = 32) -> bytes: ...
def unpack_ids(data: BytesLike, *, width: Width = 32) -> list[int]: ...
