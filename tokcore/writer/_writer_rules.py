"""The stream writer's rules, as data both twins read: the probe sentinels, the slots a frame
fills, the frames of each API, the serializer styles and the template program's op codes.

A *frame* is one SSE event a server writes (a text chunk, the final usage chunk, Anthropic's
``content_block_delta``...). A shape holds one template per frame, compiled from a *probe*:
the server's own serialized frame made with the sentinel values of ``PROBE`` in its variable
places (``_writer_shape``). A template is a flat program of ops over slots (below), run by
both writers (``_writer_py``, ``_writer_c``).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

#: the APIs a writer writes: Chat Completions, (legacy) Completions, OpenAI Responses,
#: Anthropic Messages
WriterApi = Literal["chat", "completions", "responses", "messages"]
APIS: tuple[str, ...] = ("chat", "completions", "responses", "messages")

#: how each serializer writes strings and floats (``STYLES``)
Style = Literal["pydantic", "orjson", "msgspec", "json", "json_unicode"]


class Probe(NamedTuple):
    """The sentinel values a probe is made with: put each one in the stack's own chunk where
    the writer is to write that value, serialize the chunk as the server does, and give the
    bytes to ``StreamShape``. Strings, ints, floats and int lists every serializer writes
    verbatim; a field with a ``Literal`` type takes a string sentinel through the model's
    ``model_construct``."""

    # the stream's constants (StreamWriter's arguments)
    id: str = "<<id>>"
    model: str = "<<model>>"
    created: int = 987654302
    system_fingerprint: str = "<<system_fingerprint>>"
    role: str = "<<role>>"
    # each frame's values (StreamWriter.write's arguments)
    text: str = "<<text>>"
    index: int = 987654301  # type: ignore[assignment]  # (a field, not tuple.index)
    token_ids: tuple[int, ...] = (987654312,)
    finish_reason: str = "<<finish_reason>>"
    stop_reason: str = "<<stop_reason>>"
    tool_index: int = 987654303
    tool_id: str = "<<tool_id>>"
    tool_name: str = "<<tool_name>>"
    item_id: str = "<<item_id>>"
    content_index: int = 987654304
    sequence_number: int = 987654305
    # the usage object (Usage)
    prompt_tokens: int = 987654306
    completion_tokens: int = 987654307
    total_tokens: int = 987654308
    cached_tokens: int = 987654309
    reasoning_tokens: int = 987654310
    # one token's logprob (TokenLogprob) and one of its top logprobs (TopLogprob): a probe
    # holds one of each, the writer one per token and per top logprob given
    lp_token: str = "<<lp_token>>"
    lp_logprob: float = -987654.25
    lp_bytes: tuple[int, ...] = (987654313,)
    lp_offset: int = 987654311
    top_token: str = "<<top_token>>"
    top_logprob: float = -987654.5
    top_bytes: tuple[int, ...] = (987654314,)
    # the prompt's token ids (vLLM's return_token_ids: on a stream's first chunk)
    prompt_token_ids: tuple[int, ...] = (987654315,)


#: the sentinels
PROBE = Probe()

# --- slots: every value a template writes, by number (the op programs hold these numbers)
#: the slot names in slot-number order (Probe's field order)
SLOTS: tuple[str, ...] = Probe._fields
SLOT = {name: number for number, name in enumerate(SLOTS)}
#: the stream's constants, rendered once per writer
CONSTANT_SLOTS = frozenset({"id", "model", "created", "system_fingerprint", "role"})
#: slots whose value is one logprob entry's (level 1) or one top logprob's (level 2)
LEVEL = {"lp_token": 1, "lp_logprob": 1, "lp_bytes": 1, "lp_offset": 1,
         "top_token": 2, "top_logprob": 2, "top_bytes": 2}
USAGE_SLOTS = frozenset({"prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens",
                         "reasoning_tokens"})

# the kind of each slot's value
K_STR, K_INT, K_FLOAT, K_INTS, K_STR_OR_INT = range(5)
KIND = {name: (K_STR if isinstance(value, str) else K_INT if isinstance(value, int)
               else K_FLOAT if isinstance(value, float) else K_INTS)
        for name, value in PROBE._asdict().items()}
KIND["stop_reason"] = K_STR_OR_INT  # vLLM's stop_reason: the stop string or token id
#: slots that may be None (written ``null``, or their member left out: omit_none)
NULLABLE = frozenset({"system_fingerprint", "finish_reason", "stop_reason", "token_ids",
                      "cached_tokens", "reasoning_tokens", "lp_bytes", "top_bytes",
                      "prompt_token_ids"})
#: the values made of several slots, each one argument (the logprob entries of a step, its
#: usage, one entry's top logprobs): a None is written where the group's value is; their
#: numbers follow the slots'
GROUPS: tuple[str, ...] = ("logprobs", "usage", "top_logprobs")
G_LOGPROBS, G_USAGE, G_TOP = len(SLOTS), len(SLOTS) + 1, len(SLOTS) + 2
GROUP = {name: len(SLOTS) + i for i, name in enumerate(GROUPS)}

# --- the op codes of a template program (a tuple of ops, each a tuple, code first)
#: (OP_CONST, bytes): write the bytes
OP_CONST = 0
#: (OP_SLOT, slot): write the slot's value (None is ``null`` for a nullable slot)
OP_SLOT = 1
#: (OP_MEMBER, key, value, omit, none, end): a member (or list item: ``key`` empty) whose
#: value is the slot or group ``value``: when that is None, write nothing (``omit``) or
#: ``key`` and ``none`` (``null``; ``[]`` for the logprobs list of Responses) and go on at op
#: ``end``; else write ``key`` and go on
OP_MEMBER = 2
#: (OP_LOOP, level, end, keyed): the items of a level (1: the step's logprob entries, 2: the
#: current entry's top logprobs): none, go on at op ``end``; else the first one is current.
#: ``keyed``: they are an object's members keyed by token (the legacy completions'
#: ``{token: logprob}``, a dict the servers build): a token given twice is written once, where
#: it came first, with the value given last
OP_LOOP = 3
#: (OP_NEXT, level, start, sep): another item: make it current, write ``sep`` and go on at
#: op ``start``; no other: go on
OP_NEXT = 4

#: a frame's framing, when its probe is the JSON alone: ``data: <json>\n\n``, with
#: ``event: <its "type">\n`` before it for the APIs whose events are typed
TYPED_EVENTS = frozenset({"responses", "messages"})
DONE_FRAME = b"data: [DONE]\n\n"
#: the frame ``StreamWriter.done()`` writes: the stream's last (Responses has none: its last
#: event, ``response.completed``, holds the whole response)
DONE_FRAMES = {"chat": "done", "completions": "done", "messages": "message_stop"}
#: the APIs whose usage details are counts, never null (OpenAI's ``ResponseUsage``: its
#: ``cached_tokens`` and ``reasoning_tokens`` are required ints): a count not given is 0
ZERO_DETAILS = frozenset({"responses"})


class FrameSpec(NamedTuple):
    """A frame an API's shapes may have: the sentinels its probe must hold (each once) and
    the ones it may hold (at most once each; the stream's constants are always allowed)."""

    required: frozenset[str]
    optional: frozenset[str]


def _spec(required: str, optional: str = "") -> FrameSpec:
    return FrameSpec(frozenset(required.split()), frozenset(optional.split()))


_LOGPROBS = "lp_token lp_logprob lp_bytes lp_offset top_token top_logprob top_bytes"
_USAGE = "prompt_tokens completion_tokens total_tokens cached_tokens reasoning_tokens"
_STEP = f"index token_ids prompt_token_ids finish_reason stop_reason {_LOGPROBS} {_USAGE}"

#: the frames of each API and what their probes hold. ``done`` has no sentinel: chat and
#: completions write ``data: [DONE]`` unless a shape's probe says otherwise
FRAMES: dict[str, dict[str, FrameSpec]] = {
    "chat": {
        "start": _spec("", f"index prompt_token_ids {_USAGE}"),  # the first chunk: the role
        "text": _spec("text", _STEP),
        "reasoning": _spec("text", _STEP),
        "tool_start": _spec("tool_index tool_id tool_name", f"text {_STEP}"),
        "tool_args": _spec("tool_index text", _STEP),
        "finish": _spec("finish_reason", f"text {_STEP}"),
        # the finishing step of a reasoning or tool-call delta, where the server keeps that
        # delta on its finish chunk (vLLM): step(text, kind=..., finish_reason=...)
        "finish_reasoning": _spec("finish_reason text", _STEP),
        "finish_tool_args": _spec("finish_reason tool_index text", _STEP),
        "usage": _spec("prompt_tokens completion_tokens", _USAGE),
        "done": _spec(""),
    },
    "completions": {
        "text": _spec("text", _STEP),
        "finish": _spec("finish_reason", f"text {_STEP}"),
        "usage": _spec("prompt_tokens completion_tokens", _USAGE),
        "done": _spec(""),
    },
    "responses": {
        # the response's events (its object: the stream's constants, the output's text and
        # item, the usage; what the request set, echoed, is the probe's)
        "created": _spec("", "sequence_number"),
        "in_progress": _spec("", "sequence_number"),
        "completed": _spec("", f"text index item_id content_index sequence_number {_USAGE}"),
        "incomplete": _spec("", f"text index item_id content_index sequence_number "
                                f"finish_reason {_USAGE}"),
        # an output item's and its content part's
        "item_added": _spec("", "index item_id sequence_number"),
        "part_added": _spec("", "index item_id content_index sequence_number"),
        "text_done": _spec("text", f"index item_id content_index sequence_number {_LOGPROBS}"),
        "part_done": _spec("text", "index item_id content_index sequence_number"),
        "item_done": _spec("", "text index item_id content_index sequence_number"),
        # the deltas
        "text": _spec("text", f"index item_id content_index sequence_number {_LOGPROBS}"),
        "reasoning": _spec("text", "index item_id content_index sequence_number"),
        "tool_args": _spec("text", "index item_id sequence_number"),
    },
    "messages": {
        "message_start": _spec("", _USAGE),
        "text_start": _spec("", "index"),
        "reasoning_start": _spec("", "index"),
        "tool_start": _spec("tool_id tool_name", "index"),
        "text": _spec("text", "index"),
        "reasoning": _spec("text", "index"),
        "tool_args": _spec("text", "index"),
        "block_stop": _spec("", "index"),
        "message_delta": _spec("", f"finish_reason stop_reason {_USAGE}"),
        "message_stop": _spec(""),
        "ping": _spec(""),
    },
}


class StyleRules(NamedTuple):
    """How one serializer writes a string and a float (measured on each: tests/stream)."""

    #: non-ASCII characters and DEL as ``\\uXXXX`` escapes (json.dumps' ensure_ascii)
    ascii: bool
    #: a lone surrogate: 0 escaped as ``\\udXXX`` (json.dumps), 1 a ``UnicodeEncodeError``
    #: (pydantic-core, msgspec; a str from json.dumps(ensure_ascii=False) when encoded),
    #: 2 a ``TypeError`` (orjson's JSONEncodeError is one)
    surrogates: int
    #: 0 Python's repr (``-9.999e-05``, ``1e+16``); 1 decimal for exponents -5..15 and
    #: ``e+``/``e-`` outside (pydantic-core, orjson: ``-0.00009999``, ``1e-7``, ``1e+16``);
    #: 2 the same with no ``+`` (msgspec: ``1e16``)
    floats: int
    #: inf and nan: False ``null`` (pydantic-core's default, orjson, msgspec), True
    #: ``Infinity``, ``-Infinity``, ``NaN`` (json.dumps)
    nonfinite_literal: bool


SURROGATE_ESCAPE, SURROGATE_UNICODE_ERROR, SURROGATE_TYPE_ERROR = range(3)
FLOAT_REPR, FLOAT_RYU_PLUS, FLOAT_RYU = range(3)
STYLES: dict[str, StyleRules] = {
    "pydantic": StyleRules(False, SURROGATE_UNICODE_ERROR, FLOAT_RYU_PLUS, False),
    "orjson": StyleRules(False, SURROGATE_TYPE_ERROR, FLOAT_RYU_PLUS, False),
    "msgspec": StyleRules(False, SURROGATE_UNICODE_ERROR, FLOAT_RYU, False),
    "json": StyleRules(True, SURROGATE_ESCAPE, FLOAT_REPR, True),
    "json_unicode": StyleRules(False, SURROGATE_UNICODE_ERROR, FLOAT_REPR, True),
}
