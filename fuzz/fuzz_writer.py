"""Fuzz StreamWriter: both twins, every built-in shape of Chat Completions and Completions,
fuzzed texts (every code point class, lone surrogates), indices, token ids and logprobs
(any double: NaN, infinities, subnormals), through text, texts, step and steps; and the
text deltas of Responses (from a drawn sequence number, up to the last of int64) and
Anthropic Messages, through text and texts.

The first bytes choose the shape, the call and the values (:func:`draw_call`); the rest
makes the texts. Each call must give the same outcome in both twins (the bytes, or the
exception with its message), and:
- bytes: every frame is ``data: <JSON>`` (never invalid JSON), each text comes back as it
  was given, each logprob as the double it was (a non-finite one as ``null``: every shape
  here writes them as pydantic-core, orjson and msgspec do), each token id and index too;
- an exception only where the contract calls for one: a lone surrogate in a text or token
  (``UnicodeEncodeError``, or ``TypeError`` in an orjson shape: "surrogates not allowed"),
  an index outside int64 (``OverflowError`` "is outside the int64 range"), a Responses
  event that would leave the next sequence number outside int64 (``OverflowError``).
"""

from __future__ import annotations

import json
import math
import struct
import sys
from typing import Any

from _parity import Allow, Draw, agree, fail, fuzz_main, instrumented, load_twins, outcomes

with instrumented(__name__ == "__main__" and "--random" not in sys.argv,
                  own=["writer._writer_py", "writer._writer_shape"],
                  native_skip=["writer._writer_py", "writer._writer_shape"]):
    TWINS = load_twins("writer._writer")
    from tokcore import StreamShape

SHAPES = [("chat", "vllm"), ("chat", "trtllm"), ("chat", "sglang"), ("chat", "openai"),
          ("completions", "vllm"), ("completions", "trtllm"), ("completions", "sglang"),
          ("completions", "openai")]
#: the APIs of events (their text deltas only: text and texts), each from a drawn sequence
#: number (Responses: digit-count edges and the last numbers of int64)
EVENT_SHAPES = [("responses", "openai"), ("messages", "anthropic")]
SEQUENCE_NUMBERS = [0, 9, 99, 999_999, 2**31 - 1, 2**63 - 5, 2**63 - 2, 2**63 - 1]
BUILT = {key: StreamShape(*key)  # type: ignore[arg-type]
         for key in SHAPES + EVENT_SHAPES}
#: the shapes with token ids in their text frame, and those with a text offset per entry
TOKEN_IDS = {("chat", "vllm"), ("chat", "sglang"), ("completions", "vllm"),
             ("completions", "trtllm")}
#: code points by class: plain ASCII, escapes, DEL, Latin-1, BMP, U+2028, astral, surrogates
CLASSES = [(0x20, 0x7e), (0x00, 0x1f), (0x22, 0x22), (0x5c, 0x5c), (0x7f, 0x7f), (0x80, 0xff),
           (0x100, 0x7ff), (0x800, 0xd7ff), (0x2028, 0x2029), (0xe000, 0xffff),
           (0x10000, 0x10ffff)]
SURROGATES = (0xd800, 0xdfff)
OVERFLOW = [Allow(OverflowError, "is outside the int64 range")]


def draw_text(draw: Draw, surrogates: bool) -> str:
    """A text of up to 40 code points, each of a drawn class (a run of plain ASCII often:
    the vectors' case); a lone surrogate only when asked."""
    out = []
    for _ in range(draw.int(0, 40)):
        pick = draw.byte()
        if pick < 96:
            out.append(chr(draw.int(0x61, 0x7a)) * draw.int(1, 20))
            continue
        low, high = SURROGATES if surrogates and pick >= 250 else CLASSES[pick % len(CLASSES)]
        out.append(chr(draw.int(low, high)))
    return "".join(out)


def draw_double(draw: Draw) -> float:
    kind = draw.byte()
    if kind < 64:
        return -draw.int(0, 10**6) / 10 ** draw.int(0, 12)
    if kind < 80:
        return draw.choice([math.inf, -math.inf, math.nan, 0.0, -0.0, 5e-324, 1e16, 1e-5])
    return struct.unpack("<d", draw.bytes(8).ljust(8, b"\0"))[0]  # any bit pattern


def draw_entry(draw: Draw, surrogates: bool) -> tuple[Any, ...]:
    token = draw_text(draw, surrogates)
    raw = None if draw.bool() else token.encode("utf-8", "replace")
    tops = [(draw_text(draw, surrogates), draw_double(draw), None)
            for _ in range(draw.int(0, 4))]
    return token, draw_double(draw), raw, tops, draw.int(0, 10**6)


def draw_call(draw: Draw) -> tuple[tuple[str, str], str, list[dict[str, Any]]]:
    """(shape, call: text/texts/step/steps, the steps' values); an API of events one input
    in four, with text or texts from a drawn sequence number (the first step's "seq")."""
    if draw.byte() < 64:
        key = EVENT_SHAPES[draw.int(0, len(EVENT_SHAPES) - 1)]
        call = draw.choice(["text", "texts"])
        seq = draw.choice(SEQUENCE_NUMBERS)
    else:
        key = SHAPES[draw.int(0, len(SHAPES) - 1)]
        call = draw.choice(["text", "texts", "step", "steps"])
        seq = 0
    surrogates = draw.byte() >= 224  # a lone surrogate may come, 1 input in 8
    steps = []
    for _ in range(draw.int(1, 4)):
        index = draw.int(0, 7)
        if draw.byte() >= 250:  # an index outside int64
            index = draw.choice([2**63, -(2**63) - 1, 2**70])
        step: dict[str, Any] = {"text": draw_text(draw, surrogates), "index": index}
        if call in ("step", "steps"):
            if key in TOKEN_IDS and draw.bool():
                step["token_ids"] = [draw.int(0, 2**31 - 1) for _ in range(draw.int(0, 4))]
            if draw.bool():
                step["logprobs"] = [draw_entry(draw, surrogates) for _ in range(draw.int(0, 3))]
        steps.append(step)
    if call in ("text", "step"):
        steps = steps[:1]
    else:  # a batch has one index
        for step in steps:
            step["index"] = steps[0]["index"]
    steps[0]["seq"] = seq
    return key, call, steps


def run(twin: Any, key: tuple[str, str], call: str, steps: list[dict[str, Any]]) -> bytes:
    w = twin.StreamWriter(BUILT[key], id="chatcmpl-fuzz", model="m", created=1,
                          item_id="msg_fuzz" if key[0] == "responses" else None)
    if key[0] == "responses":
        w.sequence_number = steps[0]["seq"]
    if call == "text":
        return w.text(steps[0]["text"], steps[0]["index"])  # type: ignore[no-any-return]
    if call == "texts":
        return w.texts([s["text"] for s in steps], steps[0]["index"])  # type: ignore[no-any-return]
    if call == "step":
        s = steps[0]
        return w.step(s["text"], s["index"], token_ids=s.get("token_ids"),  # type: ignore[no-any-return]
                      logprobs=s.get("logprobs"))
    return w.steps([(s["text"], s["index"], "text", s.get("token_ids"), s.get("logprobs"))  # type: ignore[no-any-return]
                    for s in steps])


def allowed(key: tuple[str, str], steps: list[dict[str, Any]]) -> list[Allow]:
    rules = []
    if any(not -(2**63) <= s["index"] < 2**63 for s in steps):
        rules += OVERFLOW
    if key[0] == "responses" and steps[0]["seq"] + len(steps) > 2**63 - 1:
        rules.append(Allow(OverflowError, "the next event's would be outside the int64 range"))
    texts = [s["text"] for s in steps]
    for s in steps:
        for entry in s.get("logprobs") or ():
            texts += [entry[0]] + [top[0] for top in entry[3]]
    if any(any(0xd800 <= ord(c) <= 0xdfff for c in t) for t in texts):
        style = BUILT[key].style
        rules.append(Allow(TypeError if style == "orjson" else UnicodeEncodeError,
                           "surrogates not allowed"))
    return rules


def test_one_input(data: bytes) -> None:
    draw = Draw(data)
    key, call, steps = draw_call(draw)
    rules = allowed(key, steps)
    got = agree(outcomes(TWINS, lambda twin: run(twin, key, call, steps)), rules,
                f"{key} {call}")
    if isinstance(got, bytes):
        check_frames(key, got, steps)


def check_frames(key: tuple[str, str], frames: bytes, steps: list[dict[str, Any]]) -> None:
    """Every frame is data: <JSON>, holding the values it was given."""
    datas = [frame for frame in frames.split(b"\n\n") if frame]
    if len(datas) != len(steps):
        fail(f"{key}: {len(datas)} frames for {len(steps)} steps: {frames!r}")
    if key in EVENT_SHAPES:
        check_events(key, datas, steps)
        return
    for frame, step in zip(datas, steps):
        if not frame.startswith(b"data: "):
            fail(f"{key}: a frame without its data line: {frame!r}")
        try:
            chunk = json.loads(frame[6:].rstrip(b" "))
        except ValueError as exc:
            fail(f"{key}: a frame that is not JSON ({exc}): {frame!r}")
        choice = chunk["choices"][0]
        text = choice.get("text", (choice.get("delta") or {}).get("content"))
        if text != step["text"] or choice["index"] != step["index"]:
            fail(f"{key}: {frame!r} does not hold the text {step['text']!r} at "
                 f"{step['index']}")
        if "token_ids" in step and choice.get("token_ids") != step["token_ids"]:
            fail(f"{key}: {frame!r} does not hold the token ids {step['token_ids']}")
        entries = step.get("logprobs")
        if entries is not None:
            check_logprobs(key, choice["logprobs"], entries, frame)


def check_events(key: tuple[str, str], frames: list[bytes], steps: list[dict[str, Any]]) -> None:
    """Each frame an event line and a data line: the delta of its step's text at its index
    (Responses: numbered on from the first step's sequence number)."""
    for k, (frame, step) in enumerate(zip(frames, steps)):
        event, _, data = frame.partition(b"\ndata: ")
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            fail(f"{key}: a frame that is not JSON ({exc}): {frame!r}")
        if event != b"event: " + chunk["type"].encode():
            fail(f"{key}: the event line is not the data's type: {frame!r}")
        if key[0] == "responses":
            ok = (chunk["delta"], chunk["output_index"], chunk["sequence_number"]) == (
                step["text"], step["index"], steps[0]["seq"] + k)
        else:
            ok = (chunk["delta"]["text"], chunk["index"]) == (step["text"], step["index"])
        if not ok:
            fail(f"{key}: {frame!r} does not hold the text {step['text']!r} at "
                 f"{step['index']}")


def check_logprobs(key: tuple[str, str], got: Any, entries: list[tuple[Any, ...]],
                   frame: bytes) -> None:
    def same(value: Any, want: float) -> bool:
        return value is None if not math.isfinite(want) else (
            value == want and math.copysign(1, value) == math.copysign(1, want))

    if key[0] == "completions":
        ok = got["tokens"] == [e[0] for e in entries] and all(
            same(v, e[1]) for v, e in zip(got["token_logprobs"], entries, strict=True))
    else:
        ok = [c["token"] for c in got["content"]] == [e[0] for e in entries] and all(
            same(c["logprob"], e[1]) and len(c["top_logprobs"]) == len(e[3])
            for c, e in zip(got["content"], entries, strict=True))
    if not ok:
        fail(f"{key}: {frame!r} does not hold the logprobs {entries!r}")


if __name__ == "__main__":
    fuzz_main("writer", test_one_input)
    sys.exit(0)
