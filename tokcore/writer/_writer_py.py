"""The stream writer, pure Python: the reference twin of ``_writer_c``.

A writer is made once per stream from a shape (``StreamShape``: the server's frames as
template programs) and the stream's constants; each call writes whole SSE frames as bytes,
byte for byte what the server's own serializer writes. The rules (slots, ops, styles) are
``_writer_rules``'; both twins run the same programs and raise the same errors with the
same messages (the checks are here, and the Cython twin calls them to name a problem).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Sequence
from types import MethodType
from typing import NamedTuple

from .._args import in_use
from ._writer_rules import (
    CONSTANT_SLOTS,
    DONE_FRAMES,
    FLOAT_REPR,
    FLOAT_RYU_PLUS,
    G_LOGPROBS,
    G_TOP,
    G_USAGE,
    GROUP,
    K_FLOAT,
    K_INT,
    K_INTS,
    K_STR,
    KIND,
    NULLABLE,
    OP_CONST,
    OP_LOOP,
    OP_MEMBER,
    OP_SLOT,
    SLOT,
    SLOTS,
    STYLES,
    SURROGATE_ESCAPE,
    SURROGATE_TYPE_ERROR,
    ZERO_DETAILS,
    StyleRules,
)
from ._writer_shape import Program, StreamShape, _no_frame

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1


class TopLogprob(NamedTuple):
    """One of a token's top logprobs: its token, logprob and UTF-8 bytes (None: ``null``; a
    ``bytes`` object is written as the list of its byte values). A plain tuple of two or
    three items is one too."""

    token: str
    logprob: float
    bytes: bytes | Sequence[int] | None = None


class TokenLogprob(NamedTuple):
    """One streamed token's logprob: its token, logprob, UTF-8 bytes, top logprobs (None:
    the server writes none) and text offset (the legacy completions' ``text_offset``). A
    plain tuple of two to five items is one too."""

    token: str
    logprob: float
    bytes: bytes | Sequence[int] | None = None
    top: Sequence[TopLogprob | tuple[object, ...]] | None = ()
    offset: int | None = None


class Usage(NamedTuple):
    """A usage object's counts: ``total_tokens`` is written as their sum. A plain tuple of
    two to four ints is one too. A count of None is written ``null`` or left out, as the
    shape says; in Responses it is written 0 (OpenAI's ``ResponseUsage`` has no null
    count). A count given to a frame whose usage has no such field is a ``ValueError``."""

    prompt_tokens: int
    completion_tokens: int
    cached_tokens: int | None = None
    reasoning_tokens: int | None = None


class Step(NamedTuple):
    """One frame of ``StreamWriter.steps``: ``StreamWriter.step``'s arguments in order."""

    text: str | None = None
    index: int = 0  # type: ignore[assignment]  # (a field, not tuple.index)
    kind: str = "text"
    token_ids: Sequence[int] | None = None
    logprobs: Sequence[TokenLogprob | tuple[object, ...]] | None = None
    finish_reason: str | None = None
    stop_reason: str | int | None = None
    usage: Usage | tuple[int, ...] | None = None
    prompt_token_ids: Sequence[int] | None = None


# --- checks and their messages: one place, for both twins

def type_name(value: object) -> str:
    return type(value).__name__


def bad_type(what: str, wanted: str, value: object) -> TypeError:
    return TypeError(f"{what} must be {wanted}, not {type_name(value)}")


def check_str(value: object, what: str) -> str:
    if not isinstance(value, str):
        raise bad_type(what, "a str", value)
    return value


def check_int(value: object, what: str) -> int:
    """An int (not a bool) in int64, as an exact int: a subclass (an ``int``-mixin ``Enum``,
    numpy's ints are not one) is its value, as json.dumps and pydantic write it, read
    without running its methods."""
    if type(value) is not int:
        if not isinstance(value, int) or isinstance(value, bool):
            raise bad_type(what, "an int", value)
        value = int.__int__(value)  # (the value itself: no __int__ of the subclass runs)
    if not INT64_MIN <= value <= INT64_MAX:
        raise OverflowError(f"{what} = {_shown(value)} is outside the int64 range")
    return value


def check_float(value: object, what: str) -> float:
    """A float, or an int (not a bool) as the float it is, as an exact float: a subclass
    (numpy.float64, an ``int``-mixin ``Enum``) is its value, as the serializers write it,
    read without running its methods; an int too large for a float is an ``OverflowError``
    naming the slot."""
    if type(value) is float:
        return value
    if isinstance(value, float):
        return float.__float__(value)  # (the double it holds)
    if isinstance(value, int) and not isinstance(value, bool):
        try:
            return int.__float__(value)
        except OverflowError:
            raise OverflowError(f"{what} = {_shown(value)} is outside the float range"
                                ) from None
    raise bad_type(what, "a float", value)


def _shown(value: int) -> str:
    """An int in a message: its digits, or its size when str() would refuse so many."""
    if value.bit_length() > 4000:
        return f"an int of {value.bit_length()} bits"
    return str(int.__int__(value))


def stored(value: list[object] | tuple[object, ...]) -> tuple[object, ...]:
    """A list's or tuple's items as it holds them now, as a tuple: what the writer checks
    and writes (a subclass's ``__len__``, ``__iter__`` and ``__getitem__`` are not called, as
    json's and orjson's encoders do not call them; an item's code that changes the list
    later does not change what is written)."""
    if type(value) is tuple:
        return value
    if isinstance(value, list):
        return tuple(list.__iter__(value))  # (list's iterator: the items held)
    return tuple.__getitem__(value, slice(None))  # (a plain tuple of the items held)


def stored_bytes(value: bytes | bytearray) -> bytes | bytearray:
    """A bytes or bytearray object's bytes as it holds them now (a subclass's methods, its
    ``__bytes__``, ``__iter__``..., not called)."""
    if type(value) is bytes:
        return value
    if isinstance(value, bytes):
        return bytes.__getitem__(value, slice(None))
    return bytearray.copy(value)


def check_ints(value: object, what: str) -> Sequence[int]:
    """A list of ints: a list or tuple of ints, or (for bytes slots) a bytes object; its
    items as stored (``stored``)."""
    if isinstance(value, (bytes, bytearray)):
        return stored_bytes(value)
    if not isinstance(value, (list, tuple)):
        raise bad_type(what, "a list or tuple of ints", value)
    items = stored(value)
    for i, item in enumerate(items):
        check_int(item, f"{what}[{i}]")
    return items  # type: ignore[return-value]


def check_tuple(value: object, what: str, low: int, high: int) -> tuple[object, ...]:
    if not isinstance(value, (tuple, list)):
        raise bad_type(what, "a tuple", value)
    items = stored(value)
    if not low <= len(items) <= high:
        raise ValueError(f"{what} must have {low} to {high} items, not {len(items)}")
    return items


def check_seq(value: object, what: str) -> Sequence[object]:
    if not isinstance(value, (list, tuple)):
        raise bad_type(what, "a list or tuple", value)
    return stored(value)


def no_slot(shape: StreamShape, frame: str, slot: str) -> ValueError:
    return ValueError(f"the {frame!r} frame of this {shape.api} shape ({shape.name}) has no "
                      f"{slot}: its probe holds no sentinel for it")


def surrogate_error(rules: StyleRules, text: str, what: str) -> Exception:
    """A lone surrogate, refused as the style's serializer refuses it."""
    at = next(i for i, c in enumerate(text) if "\ud800" <= c <= "\udfff")
    if rules.surrogates == SURROGATE_TYPE_ERROR:
        return TypeError(f"{what}: str is not valid UTF-8: surrogates not allowed")
    return UnicodeEncodeError("utf-8", text, at, at + 1,
                              f"surrogates not allowed (in {what})")


# --- rendering by style

def render_str(rules: StyleRules, text: str, what: str) -> bytes:
    """A JSON string as the style's serializer writes it."""
    if rules.ascii:
        return json.dumps(text).encode("ascii")
    try:
        return json.dumps(text, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        if rules.surrogates == SURROGATE_ESCAPE:  # (no style escapes without ascii)
            raise
        raise surrogate_error(rules, text, what) from None


def render_float(rules: StyleRules, value: float) -> bytes:
    if not math.isfinite(value):
        if not rules.nonfinite_literal:
            return b"null"
        return b"NaN" if value != value else b"Infinity" if value > 0 else b"-Infinity"
    text = repr(value)
    if rules.floats == FLOAT_REPR:
        return text.encode("ascii")
    return ryu_float(text, rules.floats == FLOAT_RYU_PLUS).encode("ascii")


def ryu_float(text: str, plus: bool) -> str:
    """Python's repr of a float (its shortest round-trip digits) as pydantic-core and orjson
    write it (``plus``), or msgspec: decimal when the point falls within the 16 digits
    before it or 5 after, else one digit, a point and the rest, then ``e`` and the exponent
    (``+`` before a positive one for the first two)."""
    sign = "-" if text.startswith("-") else ""
    text = text.lstrip("-")
    mantissa, _, exp = text.partition("e")
    whole, _, frac = mantissa.partition(".")
    digits = (whole + frac).lstrip("0")
    if not digits:
        return sign + "0.0"
    point = len(whole) + (int(exp) if exp else 0) - (len(whole + frac) - len(digits))
    digits = digits.rstrip("0")
    n = len(digits)
    if 0 < point <= 16:
        if n <= point:
            return f"{sign}{digits}{'0' * (point - n)}.0"
        return f"{sign}{digits[:point]}.{digits[point:]}"
    if -5 < point <= 0:
        return f"{sign}0.{'0' * -point}{digits}"
    e = point - 1
    head = digits[0] + ("." + digits[1:] if n > 1 else "")
    return f"{sign}{head}e{'+' if plus and e > 0 else ''}{e}"


def render_ints(value: Sequence[int], sep: bytes) -> bytes:
    """Checked ints (an int subclass written as its value, no method of it run)."""
    return b"[" + sep.join(int.__repr__(v).encode("ascii") for v in value) + b"]"


class _Entry(NamedTuple):
    """A logprob entry (or top logprob) after its checks."""

    token: str
    logprob: float
    bytes: Sequence[int] | None
    top: Sequence[object] | None
    offset: int | None


def check_entry(value: object, what: str, top: bool) -> _Entry:
    """One logprob entry (``top``: one of its top logprobs), checked."""
    item = check_tuple(value, what, 2, 3 if top else 5)
    token = str.__str__(check_str(item[0], f"{what}.token"))  # (a subclass: its text)
    logprob = check_float(item[1], f"{what}.logprob")
    raw = item[2] if len(item) > 2 else None
    byte_values = None if raw is None else check_ints(raw, f"{what}.bytes")
    raw_tops = item[3] if len(item) > 3 else ()
    tops = None if raw_tops is None else check_seq(raw_tops, f"{what}.top")
    raw_offset = item[4] if len(item) > 4 else None
    offset = None if raw_offset is None else check_int(raw_offset, f"{what}.offset")
    return _Entry(token, logprob, byte_values, tops, offset)


def check_usage(value: object, zero_details: bool = False
                ) -> tuple[int, int, int | None, int | None]:
    """A usage tuple, checked (``zero_details``: a cached or reasoning count not given is 0,
    as the API's usage has no null count)."""
    item = check_tuple(value, "usage", 2, 4)
    prompt = check_int(item[0], "usage.prompt_tokens")
    completion = check_int(item[1], "usage.completion_tokens")
    raw_cached = item[2] if len(item) > 2 else None
    raw_reasoning = item[3] if len(item) > 3 else None
    cached = None if raw_cached is None else check_int(raw_cached, "usage.cached_tokens")
    reasoning = None if raw_reasoning is None else check_int(raw_reasoning,
                                                             "usage.reasoning_tokens")
    check_int(prompt + completion, "usage.total_tokens")
    if zero_details:
        return prompt, completion, cached or 0, reasoning or 0
    return prompt, completion, cached, reasoning


#: the slots of a usage object, by their place in Usage (total_tokens: the sum)
_USAGE_FIELD = {SLOT["prompt_tokens"]: 0, SLOT["completion_tokens"]: 1,
                SLOT["cached_tokens"]: 2, SLOT["reasoning_tokens"]: 3}
_LEVEL1 = {SLOT["lp_token"]: 0, SLOT["lp_logprob"]: 1, SLOT["lp_bytes"]: 2,
           SLOT["lp_offset"]: 4}
_LEVEL2 = {SLOT["top_token"]: 0, SLOT["top_logprob"]: 1, SLOT["top_bytes"]: 2}
_TOTAL = SLOT["total_tokens"]
#: a step's arguments (write()'s keywords) by slot
_ARGS = ("text", "index", "token_ids", "prompt_token_ids", "finish_reason", "stop_reason",
         "tool_index", "tool_id", "tool_name", "item_id", "content_index")
_DEFAULT_ZERO = frozenset({"index", "tool_index", "content_index"})


class StreamWriter:
    """One stream's frames as the server's own serializer writes them, as SSE bytes.

    ``shape`` is how the server writes (``StreamShape``); ``id``, ``model``, ``created``
    (default: now), ``system_fingerprint`` and ``role`` are the stream's constants, written
    wherever the shape's frames hold them. Each method returns the complete frames as
    ``bytes`` (``data: {...}\\n\\n``, with ``event:`` lines for Responses and Messages), ready
    for the response body. ``item_id`` is the Responses output item of the deltas that name
    none (a property: set it when another item begins). One writer is one stream's: a call,
    or a set of ``item_id`` or ``sequence_number``, made while another call on it runs
    (another thread's, or a callback's from a value being written) raises ``RuntimeError``.

    Values are written as the server's serializer writes them: an ``int`` or ``float``
    subclass (an ``int``-mixin ``Enum``, ``numpy.float64``) as its value, never through its
    own ``__repr__``, ``__int__`` or ``__float__``; a ``bool`` is no int (``TypeError``); an
    int outside int64 (in a float slot: outside a double's range) is an ``OverflowError``
    naming its slot (``logprobs[0].logprob``). The frames, their slots and which argument
    fills which field are tabled per built-in shape in the stream writer's guide.

    Raises, when made, ``TypeError`` for a constant of the wrong type (naming it) and
    ``OverflowError`` for a ``created`` outside int64. A method raises ``TypeError`` for a
    value of the wrong type naming its slot (``logprobs[2].top[0].logprob must be a float,
    not str``), ``OverflowError`` for a number outside its range, and ``ValueError`` naming
    the frame and the slot for a value the frame has no slot for, or a frame the shape has
    not. Every value of a call is checked before anything is written: a call that raises
    changes nothing (the ``sequence_number`` included), and no frame written is invalid
    JSON.

    A call checks its values in one order, and raises for the first bad one: the ``kind``
    of each step (``step``, ``steps``: a step's items first); then frame by frame, the
    frame's own arguments in the order of ``write``'s signature (``text``, ``index``,
    ``token_ids``, ``prompt_token_ids``, ``finish_reason``, ``stop_reason``, ``tool_index``,
    ``tool_id``, ``tool_name``, ``item_id``, ``content_index``: each one's type, range, lone
    surrogates and place in the frame), then the ``logprobs`` entry by entry (each one's
    length, token, logprob with its conversion to a double, bytes, top logprobs and their
    fields, offset), then the ``usage``; a lone surrogate in a logprob's token is found as
    the frame is written, after its checks. Each list or tuple is read once, when it is
    checked: its items as it holds them then (a subclass's ``__len__``, ``__iter__`` and
    ``__getitem__`` are not called, as json's and orjson's encoders do not call them), and
    what a value's own methods change in it later is not written. The compiled twin takes
    the built-in types on its C path and hands a call with a value of another type (a
    subclass: an ``IntEnum``, ``numpy.float64``...) to this code: the same bytes, or the
    same exception with the same message.
    """

    __slots__ = ("_shape", "_rules", "_consts", "_seq", "_item", "_token")
    _token: list[bool]

    def __init__(self, shape: StreamShape, *, id: str, model: str, created: int | None = None,
                 system_fingerprint: str | None = None, role: str = "assistant",
                 item_id: str | None = None) -> None:
        if not isinstance(shape, StreamShape):
            raise bad_type("shape", "a StreamShape", shape)
        if created is None:
            import time
            created = int(time.time())
        rules = STYLES[shape.style]
        consts: dict[int, bytes | None] = {
            SLOT["id"]: render_str(rules, check_str(id, "id"), "id"),
            SLOT["model"]: render_str(rules, check_str(model, "model"), "model"),
            SLOT["created"]: render_float(rules, float(check_int(created, "created")))
            if shape._created_float else str(check_int(created, "created")).encode("ascii"),
            SLOT["system_fingerprint"]: None if system_fingerprint is None else render_str(
                rules, check_str(system_fingerprint, "system_fingerprint"),
                "system_fingerprint"),
            SLOT["role"]: render_str(rules, check_str(role, "role"), "role"),
        }
        item = None if item_id is None else render_str(rules, check_str(item_id, "item_id"),
                                                         "item_id")
        token = getattr(self, "_token", None)
        if token is None:
            self._token = token = []
        else:
            try:
                token.pop()
            except IndexError:
                raise in_use("StreamWriter") from None
        try:
            self._shape, self._rules, self._consts, self._seq = shape, rules, consts, 0
            self._item = item
        finally:
            token.append(True)

    @property
    def shape(self) -> StreamShape:
        """The shape this writer writes."""
        return self._shape

    @property
    def item_id(self) -> str | None:
        """The Responses output item the deltas belong to when a call names none (``item_id``
        of the constructor; set it when another item begins)."""
        return None if self._item is None else json.loads(self._item)

    @item_id.setter
    def item_id(self, value: str | None) -> None:
        rendered = None if value is None else render_str(
            self._rules, check_str(value, "item_id"), "item_id")
        with _Held(self._token):
            self._item = rendered

    @property
    def sequence_number(self) -> int:
        """The ``sequence_number`` the next Responses event gets (each one written counts);
        set it to go on from events written elsewhere. An event numbered ``2**63 - 1`` is an
        ``OverflowError`` (the next number would be outside int64), the writer unchanged."""
        return self._seq

    @sequence_number.setter
    def sequence_number(self, value: int) -> None:
        value = check_int(value, "sequence_number")
        with _Held(self._token):
            self._seq = value

    # --- the frames

    def text(self, text: str, index: int = 0) -> bytes:
        """One ``text`` frame: a text delta of choice ``index`` (the common chunk)."""
        return self._frames((("text", {"text": text, "index": index}),))

    def texts(self, texts: Iterable[str], index: int = 0) -> bytes:
        """A ``text`` frame per text, as one bytes (a server's batch of steps)."""
        return self._frames([("text", {"text": text, "index": index})
                             for text in _items(texts, "texts")])

    def step(self, text: str | None = None, index: int = 0, kind: str = "text",
             token_ids: Sequence[int] | None = None,
             logprobs: Sequence[TokenLogprob | tuple[object, ...]] | None = None,
             finish_reason: str | None = None, stop_reason: str | int | None = None,
             usage: Usage | tuple[int, ...] | None = None,
             prompt_token_ids: Sequence[int] | None = None) -> bytes:
        """One step of choice ``index``: its ``text`` (the delta of ``kind``: ``"text"``,
        ``"reasoning"``, ``"tool_args"``), the step's ``token_ids`` and ``logprobs``, the
        continuous ``usage``, the prompt's ids (``prompt_token_ids``: vLLM's
        ``return_token_ids`` puts them on a completion's first chunk). The arguments are
        ``Step``'s fields in order: ``step(*Step(...))`` writes what ``steps([Step(...)])``
        does.

        With a ``finish_reason``: a text step, the shape's ``finish`` frame (the ``text``
        frame when the shape has none, or when it has no text and ``text`` is given); a
        ``reasoning`` or ``tool_args`` step with its text, the shape's ``finish_reasoning``
        or ``finish_tool_args`` frame (vLLM keeps the step's delta on its finish chunk), else
        its kind's frame when that holds the finish reason; a step without text, the
        ``finish`` frame (vLLM's ``"delta":{}``). A ``kind`` the shape has no frame for is a
        ``ValueError``, finishing or not."""
        return self._frames(((self._step_frame(kind, text, finish_reason), {
            "text": text, "index": index, "token_ids": token_ids, "logprobs": logprobs,
            "finish_reason": finish_reason, "stop_reason": stop_reason, "usage": usage,
            "prompt_token_ids": prompt_token_ids}),))

    def steps(self, steps: Iterable[Step | tuple[object, ...]]) -> bytes:
        """A frame per ``Step`` (or a tuple of ``step``'s arguments in order), as one bytes:
        several steps of a batch, every choice of ``n > 1``."""
        frames = []
        for i, item in enumerate(_items(steps, "steps")):
            values = check_tuple(item, f"steps[{i}]", 0, len(Step._fields))
            args = dict(zip(Step._fields, values))
            kind = args.pop("kind", "text")
            frames.append((self._step_frame(kind, args.get("text"), args.get("finish_reason")),
                           args))
        return self._frames(frames)

    def write(self, frame: str, text: str | None = None, index: int = 0, *,
              token_ids: Sequence[int] | None = None,
              logprobs: Sequence[TokenLogprob | tuple[object, ...]] | None = None,
              finish_reason: str | None = None, stop_reason: str | int | None = None,
              usage: Usage | tuple[int, ...] | None = None, tool_index: int = 0,
              tool_id: str | None = None, tool_name: str | None = None,
              item_id: str | None = None, content_index: int = 0,
              prompt_token_ids: Sequence[int] | None = None) -> bytes:
        """Any frame of the shape by name (``StreamShape.frames``), its slots filled from
        the arguments (``prompt_token_ids``: the prompt's ids, which vLLM's
        ``return_token_ids`` puts on a chat stream's ``start`` frame). A value for a slot
        the frame's probe has not is a ``ValueError`` naming the frame and the slot: a usage
        tuple's ``cached_tokens`` or ``reasoning_tokens`` too, where the frame's usage has no
        such field (an ``index``, ``tool_index`` or ``content_index`` of 0 is their
        default, written nowhere)."""
        if isinstance(frame, str):
            frame = str.__str__(frame)  # (a subclass: its text; its hash and == are not run)
        return self._frames(((frame, {
            "text": text, "index": index, "token_ids": token_ids, "logprobs": logprobs,
            "finish_reason": finish_reason, "stop_reason": stop_reason, "usage": usage,
            "tool_index": tool_index, "tool_id": tool_id, "tool_name": tool_name,
            "item_id": item_id, "content_index": content_index,
            "prompt_token_ids": prompt_token_ids}),))

    def usage(self, prompt_tokens: int, completion_tokens: int,
              cached_tokens: int | None = None, reasoning_tokens: int | None = None) -> bytes:
        """The ``usage`` frame: the final usage chunk of Chat Completions and Completions."""
        return self._frames((("usage", {"usage": (prompt_tokens, completion_tokens,
                                                  cached_tokens, reasoning_tokens)}),))

    def done(self) -> bytes:
        """The stream's end: ``data: [DONE]`` (Chat Completions, Completions) or Anthropic's
        ``message_stop``; Responses has no such frame (``ValueError``): its stream ends with
        the ``completed`` frame, which holds the whole response."""
        frame = DONE_FRAMES.get(self._shape.api)
        if frame is None:
            raise ValueError("a Responses stream ends with its response.completed event, "
                             "which holds the whole response: write('completed', text, "
                             "usage=...), not done()")
        return self._frames(((frame, {}),))

    # --- the work

    def _step_frame(self, kind: object, text: object, finish_reason: object) -> str:
        """The frame a step is written with: its kind's, or the finish frame."""
        if not isinstance(kind, str):
            raise bad_type("kind", "a str", kind)
        kind = str.__str__(kind)  # (a subclass: its text; its == is not run)
        if kind not in ("text", "reasoning", "tool_args"):
            raise ValueError(f"kind must be 'text', 'reasoning' or 'tool_args', not {kind!r}")
        if finish_reason is None:
            return kind
        programs = self._shape._programs
        finish = programs.get("finish")
        if kind == "text":
            if finish is not None and (text is None or "text" in finish.slots):
                return "finish"
        elif text is not None and f"finish_{kind}" in programs:
            return f"finish_{kind}"  # (the delta of its kind kept on the finish chunk)
        program = programs.get(kind)
        if program is not None and "finish_reason" in program.slots:
            return kind
        if finish is not None and (kind == "text" or text is None):
            return "finish"
        if program is None:  # (no frame of the kind: not the finish frame's text)
            raise ValueError(_no_frame(self._shape, kind))
        raise no_slot(self._shape, kind, "finish_reason")

    def _frames(self, frames: Sequence[tuple[str, dict[str, object]]]) -> bytes:
        token = self._token
        try:
            token.pop()
        except IndexError:
            raise in_use("StreamWriter") from None
        try:
            out: list[bytes] = []
            seq = self._seq
            for frame, args in frames:
                program = self._shape._program(frame)
                if program.counts and seq == INT64_MAX:
                    raise OverflowError(f"sequence_number = {seq}: the next event's would be "
                                        "outside the int64 range")
                values = self._values(frame, program, args, seq)
                self._run(program, values, out)
                seq += program.counts
            self._seq = seq
            return b"".join(out)
        finally:
            token.append(True)

    def _values(self, frame: str, program: Program, args: dict[str, object],
                seq: int) -> list[object]:
        """The frame's slot values (rendered bytes, or None) and its groups, checked: each
        argument's type first, then whether the frame has a place for it."""
        values: list[object] = [None] * (len(SLOTS) + len(GROUP))
        slots = program.slots
        for name in _ARGS:
            value = args.get(name, 0 if name in _DEFAULT_ZERO else None)
            if value is None and name == "item_id" and self._item is not None:
                values[SLOT[name]] = self._item if name in slots else None
                continue
            if value is None:
                if name in slots and name not in NULLABLE and name not in program.omitted:
                    raise bad_type(name, _WANTED[KIND[name]], None)
                continue
            rendered = self._render(name, value, program.sep)
            if name not in slots:
                if name in _DEFAULT_ZERO and rendered == b"0":
                    continue  # the default, where the frame has no such place
                raise no_slot(self._shape, frame, name)
            values[SLOT[name]] = rendered
        values[SLOT["sequence_number"]] = str(seq).encode("ascii")
        logprobs = args.get("logprobs")
        if logprobs is not None:
            entries = []
            for i, item in enumerate(check_seq(logprobs, "logprobs")):
                entry = check_entry(item, f"logprobs[{i}]", False)
                if entry.top is not None:  # (each top logprob checked: the one written)
                    entry = entry._replace(top=[
                        check_entry(top, f"logprobs[{i}].top[{j}]", True)
                        for j, top in enumerate(entry.top)])
                if entry.offset is None and "lp_offset" in slots:
                    raise bad_type(f"logprobs[{i}].offset", "an int", None)
                entries.append(entry)
            if "logprobs" not in slots:
                raise no_slot(self._shape, frame, "logprobs")
            values[G_LOGPROBS] = entries
        usage = args.get("usage")
        if usage is not None:
            counts = check_usage(usage)
            if "usage" not in slots:
                raise no_slot(self._shape, frame, "usage")
            for name, count in zip(("cached_tokens", "reasoning_tokens"), counts[2:]):
                if count is not None and name not in slots:
                    raise no_slot(self._shape, frame, name)  # (not left out unwritten)
            if self._shape.api in ZERO_DETAILS:
                counts = counts[0], counts[1], counts[2] or 0, counts[3] or 0
            values[G_USAGE] = counts
        elif frame == "usage":
            raise bad_type("usage", "a tuple of counts", None)
        for slot, value in self._consts.items():
            values[slot] = value
        return values

    def _render(self, name: str, value: object, sep: bytes) -> bytes:
        kind = KIND[name]
        if kind == K_STR:
            return render_str(self._rules, check_str(value, name), name)
        if kind == K_INT:
            return str(check_int(value, name)).encode("ascii")
        if kind == K_INTS:
            return render_ints(check_ints(value, name), sep)
        # K_STR_OR_INT: the stop string or token id
        if isinstance(value, str):
            return render_str(self._rules, value, name)
        if isinstance(value, int) and not isinstance(value, bool):
            return str(check_int(value, name)).encode("ascii")
        raise bad_type(name, "a str or an int", value)

    def _run(self, program: Program, values: list[object], out: list[bytes]) -> None:
        """Run a frame's program over its values into ``out``."""
        ops = program.ops
        entries: Sequence[_Entry] = ()
        tops: Sequence[object] = ()
        entry: _Entry | None = None
        top: _Entry | None = None
        ei = ti = 0
        i, n = 0, len(ops)
        while i < n:
            op = ops[i]
            code = op[0]
            if code == OP_CONST:
                out.append(op[1])  # type: ignore[arg-type]
                i += 1
            elif code == OP_SLOT:
                out.append(self._slot(op[1], values, entry, top, program.sep))  # type: ignore[arg-type]
                i += 1
            elif code == OP_MEMBER:
                if _value(op[2], values, entry, top) is None:  # type: ignore[arg-type]
                    if not op[3]:
                        out.append(op[1])  # type: ignore[arg-type]
                        out.append(op[4])  # type: ignore[arg-type]
                    i = op[5]  # type: ignore[assignment]
                else:
                    out.append(op[1])  # type: ignore[arg-type]
                    i += 1
            elif code == OP_LOOP:
                if op[1] == 1:
                    entries = values[G_LOGPROBS]  # type: ignore[assignment]
                    ei = 0
                    if not entries:
                        i = op[2]  # type: ignore[assignment]
                        continue
                    entry = entries[0]
                else:
                    assert entry is not None
                    tops = entry.top  # type: ignore[assignment]
                    if op[3] and tops:  # a dict by token: the first place, the last value
                        tops = list({top_item[0]: top_item for top_item in tops}.values())  # type: ignore[index]
                    ti = 0
                    if not tops:
                        i = op[2]  # type: ignore[assignment]
                        continue
                    top = tops[0]  # type: ignore[assignment]
                i += 1
            else:  # OP_NEXT
                if op[1] == 1:
                    ei += 1
                    if ei < len(entries):
                        entry = entries[ei]
                        out.append(op[3])  # type: ignore[arg-type]
                        i = op[2]  # type: ignore[assignment]
                        continue
                else:
                    ti += 1
                    if ti < len(tops):
                        top = tops[ti]  # type: ignore[assignment]
                        out.append(op[3])  # type: ignore[arg-type]
                        i = op[2]  # type: ignore[assignment]
                        continue
                i += 1

    def _slot(self, slot: int, values: list[object], entry: _Entry | None,
              top: _Entry | None, sep: bytes) -> bytes:
        """A slot's bytes: rendered already, or a logprob's or usage's value rendered now."""
        if slot in _LEVEL1 or slot in _LEVEL2:
            source = entry if slot in _LEVEL1 else top
            assert source is not None
            value = source[(_LEVEL1 if slot in _LEVEL1 else _LEVEL2)[slot]]
            if value is None:
                return b"null"
            if slot in (SLOT["lp_token"], SLOT["top_token"]):
                return render_str(self._rules, value, SLOTS[slot])  # type: ignore[arg-type]
            if slot in (SLOT["lp_logprob"], SLOT["top_logprob"]):
                return render_float(self._rules, value)  # type: ignore[arg-type]
            if slot == SLOT["lp_offset"]:
                return str(value).encode("ascii")
            return render_ints(value, sep)  # type: ignore[arg-type]
        usage = values[G_USAGE]
        if slot == _TOTAL:
            return str(usage[0] + usage[1]).encode("ascii")  # type: ignore[index]
        if slot in _USAGE_FIELD:
            value = usage[_USAGE_FIELD[slot]]  # type: ignore[index]
            return b"null" if value is None else str(value).encode("ascii")
        rendered = values[slot]
        return b"null" if rendered is None else rendered  # type: ignore[return-value]


_WANTED = {K_STR: "a str", K_INT: "an int", K_FLOAT: "a float", K_INTS: "a list of ints"}


def _value(slot: int, values: list[object], entry: _Entry | None,
           top: _Entry | None) -> object:
    """What a guarded member stands for (None: write ``null`` or leave it out)."""
    if slot == G_TOP:
        return None if entry is None else entry.top
    if slot in _LEVEL1:
        return None if entry is None else entry[_LEVEL1[slot]]
    if slot in _LEVEL2:
        return None if top is None else top[_LEVEL2[slot]]
    if slot in _USAGE_FIELD:
        usage = values[G_USAGE]
        return None if usage is None else usage[_USAGE_FIELD[slot]]  # type: ignore[index]
    return values[slot]


def _bind_arguments(self: object, shape: StreamShape, *, id: str, model: str,
                    created: int | None = None, system_fingerprint: str | None = None,
                    role: str = "assistant", item_id: str | None = None) -> None:
    """The constructor's arguments bound, and no more: the compiled twin calls it (as
    ``_bind``, bound) when they may not bind, for this twin's TypeError, message and all."""


_bind_arguments.__qualname__ = "StreamWriter.__init__"
_bind = MethodType(_bind_arguments, object())


class _Held:
    """A writer's token held while a setter sets: a set made while a call runs (another
    thread's, or a callback's from inside the call) is refused as the call is, rather than
    lost when the call stores its own state."""

    __slots__ = ("token",)

    def __init__(self, token: list[bool]) -> None:
        self.token = token

    def __enter__(self) -> None:
        try:
            self.token.pop()
        except IndexError:
            raise in_use("StreamWriter") from None

    def __exit__(self, *exc: object) -> None:
        self.token.append(True)


def _items(values: object, what: str) -> Sequence[object]:
    if isinstance(values, (str, bytes)):
        raise bad_type(what, "an iterable of items", values)
    if isinstance(values, (list, tuple)):
        return stored(values)
    try:
        return list(values)  # type: ignore[call-overload, no-any-return]
    except TypeError:
        raise bad_type(what, "an iterable", values) from None


assert CONSTANT_SLOTS <= set(SLOT)
