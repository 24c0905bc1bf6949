"""Argument checks shared by the JSON, usage and SSE twins: one place for every message.

Both twins call these (the checks are not hot), so they raise the same types with the same
text.
"""

from __future__ import annotations

import sys
from operator import index as _index
from typing import TYPE_CHECKING, Literal

# The aliases of the public signatures. Checkers take Buffer from typing_extensions (it is
# collections.abc.Buffer from 3.12 on); nothing outside the standard library is imported at
# run time, where the aliases are only read by introspection (typing.get_type_hints).
if TYPE_CHECKING:
    from typing_extensions import Buffer as Buffer
elif sys.version_info >= (3, 12):
    from collections.abc import Buffer
else:  # no Buffer ABC before 3.12: the usual buffer types stand in
    Buffer = bytes | bytearray | memoryview

#: any object with the buffer protocol: bytes, bytearray, memoryview, array, mmap, numpy
BytesLike = Buffer
#: base64 input, as the base64 module takes it: ASCII text or bytes-like
TextOrBytes = str | Buffer
#: the ``api=`` of the usage functions and the relay: the names of ``_dialects.DIALECTS``
Api = Literal["chat", "responses", "messages"]

#: token counts a caller passes are below this: they fit a C int64, a sum of two fits uint64
COUNT_LIMIT = 1 << 63


def payload_view(payload: object, what: str = "payload") -> memoryview:
    """A flat byte view of a bytes-like payload; ``str`` and the rest are a ``TypeError``."""
    if isinstance(payload, str):
        raise TypeError(f"{what} must be a bytes-like object (UTF-8 JSON), not str")
    try:
        view = memoryview(payload)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{what} must be a bytes-like object, not {type(payload).__name__}") \
            from None
    if not view.c_contiguous:
        raise TypeError(f"{what} must be a contiguous bytes-like object")
    return view.cast("B") if view.format != "B" or view.ndim != 1 else view


def payload_bytes(payload: object, what: str = "payload") -> bytes:
    """``payload`` itself when it is ``bytes``, else a copy of its bytes."""
    if type(payload) is bytes:
        return payload
    return bytes(payload_view(payload, what))


def check_count(value: object, name: str, low: int = 0) -> int:
    """A count: an integer (not a bool) in ``[low, 2**63)``."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an integer, not bool")
    try:
        count = _index(value)  # type: ignore[arg-type]
    except TypeError:
        raise TypeError(f"{name} must be an integer, not {type(value).__name__}") from None
    if not low <= count < COUNT_LIMIT:
        raise ValueError(f"{name} must be in [{low}, 2**63), got {shown(count)}")
    return count


def shown(value: int) -> str:
    """An int for a message: too long to print (int's digit limit) is said by its size."""
    return str(value) if value.bit_length() <= 256 else f"an integer of {value.bit_length()} bits"


def check_counts(prompt_tokens: object, cached_tokens: object) -> tuple[int, int | None]:
    """``(prompt, cached)``: the caller's counts, every dialect's one check. The cached tokens
    are part of the prompt, so more of them than the prompt has is a ``ValueError``."""
    prompt = check_count(prompt_tokens, "prompt_tokens")
    if cached_tokens is None:
        return prompt, None
    cached = check_count(cached_tokens, "cached_tokens")
    if cached > prompt:
        raise ValueError(f"cached_tokens ({cached}) must not exceed prompt_tokens ({prompt}): "
                         f"the cached tokens are part of the prompt")
    return prompt, cached


def check_key(key: object, what: str = "key") -> str:
    if type(key) is not str:
        raise TypeError(f"{what} must be a str, not {type(key).__name__}")
    return key


#: a key path: one key, or the keys of the objects on the way, outermost first
KeyPath = str | tuple[str, ...]


def check_path(path: object) -> tuple[str, ...]:
    """The keys of a key path (``find_member``, ``set_member``, ``del_member``): a ``str``
    is one key, a tuple of ``str`` the keys from the outermost object in."""
    if type(path) is str:
        return (path,)
    if type(path) is not tuple:
        raise TypeError(f"path must be a str or a tuple of str, not {type(path).__name__}")
    keys: tuple[object, ...] = path  # type: ignore[assignment,unused-ignore]  # a tuple here
    if not keys:
        raise ValueError("path must have at least one key")
    for i, key in enumerate(keys):
        check_key(key, f"path[{i}]")
    return keys  # type: ignore[return-value]  # each item checked to be a str


def check_switch(value: object, name: str) -> bool:
    """A keyword that switches a check off (``set_member(trusted=)``): ``True`` or ``False``
    only, so that no other truthy value (``1``, ``"yes"``, an object) turns the check off
    without the caller having said so."""
    if type(value) is not bool:
        raise TypeError(f"{name} must be True or False, not {type(value).__name__}")
    return value


def check_max_event_bytes(value: object) -> int:
    """``max_event_bytes``: an integer in ``[1, 2**63)``."""
    return check_count(value, "max_event_bytes", 1)


class Bound:
    """The checked arguments of a Python twin's ``__init__``, for its Cython twin.

    A Cython class's ``__init__(*args, **kwargs)`` calls the Python twin's ``__init__`` on a
    ``Bound``: the one signature binds the arguments (the same ``TypeError`` text for a wrong
    count or name, on every Python version) and runs the checks; that ``__init__`` ends by
    calling ``self._setup(values...)``, which here keeps the values.
    """

    __slots__ = ("values",)

    def _setup(self, *values: object) -> None:
        self.values = values


def enter_init(obj: object, what: str) -> list[bool]:
    """The call token of a per-stream object (``_token``: one item, taken by each call),
    taken for its ``__init__``: a new one for a new object. An object re-initialised while a
    call on it runs (a hook inside that call, another thread) is refused with ``in_use``
    before anything changes, as a call is; the Cython twins' busy flag does the same. The
    caller gives the token back (``token.append(True)``) when its ``__init__`` ends."""
    token: list[bool] | None = getattr(obj, "_token", None)
    if token is None:  # a new object: its token, taken
        token = []
        obj._token = token  # type: ignore[attr-defined]
        return token
    try:
        token.pop()
    except IndexError:
        raise in_use(what) from None
    return token


def in_use(what: str) -> RuntimeError:
    """The error of a per-stream object entered while a call on it is still running (another
    thread's, or a callback's): both twins refuse it rather than interleave two streams."""
    return RuntimeError(f"{what} is already in use by another call (another thread?): "
                        f"give each stream its own {what}")
