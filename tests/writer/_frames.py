"""The stream writer's frames read back, with the standard library alone: the tests that run
where the stacks' serializers do not install (the free-threaded job: no msgspec, orjson or
pydantic there) import this, not ``_writer_oracles``.
"""

from __future__ import annotations

import json
from typing import Any


def loads(frames: bytes) -> list[Any]:
    """Each frame's data parsed (every frame of the writer is JSON, or ``[DONE]``)."""
    out = []
    for frame in frames.split(b"\n\n"):
        for line in frame.split(b"\n"):
            if line.startswith(b"data: "):
                data = line[6:].rstrip(b" ")
                out.append(data.decode() if data == b"[DONE]" else json.loads(data))
    return out
