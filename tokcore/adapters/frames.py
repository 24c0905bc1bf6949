"""A server's own event stream: the frames a :class:`tokcore.StreamWriter` wrote, as bytes, to a
client. What the server adapters share (no framework here):

- the headers of such a stream (``FRAME_HEADERS``: ``text/event-stream``, ``no-cache`` and
  ``X-Accel-Buffering: no``, so that a proxy in front (nginx) passes each frame on at once);
- ``Frames``: any iterable of the frames (an async generator, a sync one, a list) read as one
  async stream that can be closed, which closes its source: a generator's ``finally`` runs
  when the client goes away, as it does at the stream's end.

The frames go to the response as the bytes they are: no ``str`` in between. A ``str``
frame is a ``TypeError`` naming its place (the writer writes bytes; a ``str`` would be encoded
again for every frame).
"""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Iterator
from typing import Any

__all__ = ["FRAME_HEADERS", "FrameSource", "Frames"]

#: the headers of a server's event stream
FRAME_HEADERS = {"Content-Type": "text/event-stream", "Cache-Control": "no-cache",
                 "X-Accel-Buffering": "no"}

#: what a response of frames takes: an async or sync iterable of bytes
FrameSource = AsyncIterable[bytes] | Iterable[bytes]


class Frames:
    """``source``'s frames as an async iterator that can be closed (``aclose()`` closes the
    source: ``aclose()`` of an async generator, ``close()`` of a sync one; again, nothing
    happens). A sync source is read on the event loop: give an async one when its items
    wait on something (an engine). ``count`` and ``sent`` are the frames and bytes read."""

    __slots__ = ("_source", "_iterator", "_async", "_closed", "count", "sent")

    def __init__(self, source: FrameSource) -> None:
        if isinstance(source, (str, bytes, bytearray, memoryview)):
            raise TypeError(f"frames must be an iterable of bytes frames, not "
                            f"{type(source).__name__}")
        self._source = source
        self._iterator: AsyncIterator[bytes] | Iterator[bytes]
        if isinstance(source, AsyncIterable):
            self._iterator, self._async = source.__aiter__(), True
        elif isinstance(source, Iterable):
            self._iterator, self._async = iter(source), False
        else:
            raise TypeError(f"frames must be an iterable of bytes frames, not "
                            f"{type(source).__name__}")
        self._closed = False
        self.count = self.sent = 0

    def __aiter__(self) -> Frames:
        return self

    async def __anext__(self) -> bytes:
        if self._closed:
            raise StopAsyncIteration
        if self._async:
            frame = await self._iterator.__anext__()  # type: ignore[union-attr]
        else:
            try:
                frame = next(self._iterator)  # type: ignore[arg-type]
            except StopIteration:
                raise StopAsyncIteration from None
        if not isinstance(frame, bytes):
            raise TypeError(f"frame {self.count} is a {type(frame).__name__}, not bytes: "
                            f"give the writer's bytes as they are")
        self.count += 1
        self.sent += len(frame)
        return frame

    async def aclose(self) -> None:
        """Close the source (and what it holds: a generator's ``finally`` runs now)."""
        if self._closed:
            return
        self._closed = True
        for target in (self._iterator, self._source):
            closer: Any = getattr(target, "aclose", None)
            if closer is not None:
                result = closer()
                if inspect.isawaitable(result):
                    await result
                return
            closer = getattr(target, "close", None)
            if closer is not None:
                closer()
                return
