"""The usage rules of each API, as data: both twins of ``_usage`` read this table.

A dialect says where an API puts its usage object and which of its members the context
server's counts go into. P is the prompt count, C the cached count (None: no cached tokens,
so 0 where the usage has a member for them, and nothing added). The usage rules of
docs/dialects.md are the contract; in short:

- ``chat`` (Chat Completions, Completions): ``prompt_tokens`` := P, ``total_tokens`` :=
  P + ``completion_tokens``, ``prompt_tokens_details.cached_tokens`` := C.
- ``responses`` (OpenAI Responses): ``input_tokens`` := P, ``total_tokens`` :=
  P + ``output_tokens``, ``input_tokens_details.cached_tokens`` := C. A response body has
  ``usage``; the stream events that end a response carry it under ``response.usage``.
- ``messages`` (Anthropic Messages): the prompt is in parts, ``input_tokens`` (neither read
  from nor written to the cache), ``cache_creation_input_tokens`` and
  ``cache_read_input_tokens``, and there is no total. ``input_tokens`` := P - C,
  ``cache_read_input_tokens`` := C, ``cache_creation_input_tokens`` := 0, so the parts sum to
  P. ``message_start`` has ``message.usage``; ``message_delta`` and a message body have
  ``usage``.
"""

from __future__ import annotations

from typing import NamedTuple


class Dialect(NamedTuple):
    name: str
    #: where the usage value may be, tried in order: the first present and not null is it
    paths: tuple[tuple[str, ...], ...]
    #: := P (or P - C when ``cached_excluded``); with ``output_key`` the dialect's own keys:
    #: a usage object with neither is another API's (foreign) and is left alone
    prompt_key: str
    output_key: str
    #: := P + output count; None: no total in this API
    total_key: str | None
    #: C goes to ``details_key.cached_key``, or to ``cached_key`` itself when None
    details_key: str | None
    cached_key: str
    #: the prompt count excludes the cached part (the prompt key := P - C)
    cached_excluded: bool
    #: := 0 where present (never added): a part of the prompt the caller's counts leave out
    zeroed_key: str | None


DIALECTS: dict[str, Dialect] = {
    "chat": Dialect("chat", (("usage",),), "prompt_tokens", "completion_tokens",
                    "total_tokens", "prompt_tokens_details", "cached_tokens", False, None),
    "responses": Dialect("responses", (("usage",), ("response", "usage")), "input_tokens",
                         "output_tokens", "total_tokens", "input_tokens_details",
                         "cached_tokens", False, None),
    "messages": Dialect("messages", (("usage",), ("message", "usage")), "input_tokens",
                        "output_tokens", None, None, "cache_read_input_tokens", True,
                        "cache_creation_input_tokens"),
}

#: the key every dialect's usage member has (the relay's byte pre-filter looks for it)
USAGE_KEY = "usage"
assert all(path[-1] == USAGE_KEY for d in DIALECTS.values() for path in d.paths)

# what became of a usage value (the relay counts these); TOO_LARGE: a usage value in an event
# too large to hold that is itself larger than the relay's bound, forwarded as it came
NONE, REWRITTEN, FOREIGN, NOT_OBJECT, UNREADABLE, TOO_LARGE = range(6)

#: an output count of more digits than this makes the usage value unreadable
MAX_COUNT_DIGITS = 18


def dialect(api: object) -> Dialect:
    """The ``Dialect`` named by ``api``; ``TypeError``/``ValueError`` for anything else."""
    if type(api) is not str:
        raise TypeError(f"api must be a str, not {type(api).__name__}")
    try:
        return DIALECTS[api]
    except KeyError:
        raise ValueError(f"api must be one of {', '.join(map(repr, DIALECTS))}, "
                         f"not {api!r}") from None
