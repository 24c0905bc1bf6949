"""The stream writer's API on both twins: frames by name, batches, choices, sequence numbers;
bad input (a wrong type is a TypeError naming the slot, a value with no place a ValueError
naming the frame, a probe without its sentinels a ValueError naming them); every frame it
writes is JSON, whatever the values (its bytes: tests/writer/test_writer_shapes.py)."""

from __future__ import annotations

import json
import math
from types import ModuleType
from typing import Any

import _twins
import pytest
from _budget import examples
from _frames import loads
from hypothesis import given, settings
from hypothesis import strategies as st

import tokcore
from tokcore import PROBE, StreamShape
from tokcore.writer import _writer_py

VLLM = StreamShape("chat", "vllm")


TEXT_PROBE = '{"id":"<<id>>","choices":[{"index":987654301,"delta":{"content":"<<text>>"}}]}'


def make(twin: ModuleType, shape: StreamShape = VLLM, **kw: Any) -> Any:
    kw.setdefault("id", "chatcmpl-1")
    kw.setdefault("model", "m")
    kw.setdefault("created", 7)
    return twin.StreamWriter(shape, **kw)


def data(frame: bytes) -> Any:
    assert frame.startswith(b"data: ") and frame.endswith(b"\n\n")
    return json.loads(frame[6:])


def test_text_frame(writer_twin: ModuleType) -> None:
    w = make(writer_twin)
    assert w.text(" Hello") == (
        b'data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":7,"model":"m",'
        b'"choices":[{"index":0,"delta":{"content":" Hello"},"logprobs":null,'
        b'"finish_reason":null,"token_ids":null}]}\n\n')
    assert data(w.text("x", 3))["choices"][0]["index"] == 3


def test_batches_are_the_frames_joined(writer_twin: ModuleType) -> None:
    w = make(writer_twin)
    texts = ["a", " b", "é", "\n", ""]
    assert w.texts(texts) == b"".join(w.text(t) for t in texts)
    assert w.texts(iter(texts), 2) == b"".join(w.text(t, 2) for t in texts)
    assert w.texts([]) == b""
    steps = [tokcore.Step("a", 0), tokcore.Step("b", 1, token_ids=[5]),
             ("c", 2, "reasoning"), tokcore.Step("d", 0, finish_reason="stop", stop_reason=7)]
    assert w.steps(steps) == b"".join(
        w.step(s[0], s[1], kind=s[2] if len(s) > 2 else "text",
               **({} if not isinstance(s, tokcore.Step) else
                  {"token_ids": s.token_ids, "finish_reason": s.finish_reason,
                   "stop_reason": s.stop_reason}))
        for s in steps)


def test_every_choice(writer_twin: ModuleType) -> None:
    """n > 1: a frame per choice, each with its index, in one call."""
    w = make(writer_twin)
    out = loads(w.steps([tokcore.Step(f"t{i}", i) for i in range(4)]))
    assert [(c["choices"][0]["index"], c["choices"][0]["delta"]["content"]) for c in out] == [
        (i, f"t{i}") for i in range(4)]


def test_finish_and_usage(writer_twin: ModuleType) -> None:
    w = make(writer_twin, system_fingerprint="fp_1")
    last = data(w.step("!", finish_reason="length", stop_reason=None))
    assert last["choices"][0]["finish_reason"] == "length"
    assert last["choices"][0]["stop_reason"] is None
    assert last["system_fingerprint"] == "fp_1"
    usage = data(w.usage(100, 20, 60))
    assert usage["usage"] == {"prompt_tokens": 100, "total_tokens": 120,
                              "completion_tokens": 20,
                              "prompt_tokens_details": {"cached_tokens": 60}}
    assert w.done() == b"data: [DONE]\n\n"


def test_continuous_usage_and_token_ids(writer_twin: ModuleType) -> None:
    w = make(writer_twin)
    frame = data(w.step("x", token_ids=(1, 2), usage=tokcore.Usage(10, 2)))
    assert frame["choices"][0]["token_ids"] == [1, 2]
    assert frame["usage"] == {"prompt_tokens": 10, "total_tokens": 12,
                              "completion_tokens": 2, "completion_tokens_details": None}


def test_logprobs(writer_twin: ModuleType) -> None:
    w = make(writer_twin)
    entries = [tokcore.TokenLogprob(" a", -0.25, b" a",
                                    [tokcore.TopLogprob(" a", -0.25, b" a"), (" b", -1.5)]),
               (" c", -9.999e-05)]
    content = data(w.step(" a c", logprobs=entries))["choices"][0]["logprobs"]["content"]
    assert content == [
        {"token": " a", "logprob": -0.25, "bytes": [32, 97],
         "top_logprobs": [{"token": " a", "logprob": -0.25, "bytes": [32, 97]},
                          {"token": " b", "logprob": -1.5, "bytes": None}]},
        {"token": " c", "logprob": -9.999e-05, "bytes": None, "top_logprobs": []}]
    assert b'"logprob":-0.00009999' in w.step(" c", logprobs=[(" c", -9.999e-05)])


def test_sequence_numbers(writer_twin: ModuleType) -> None:
    w = make(writer_twin, StreamShape("responses", "openai"), item_id="msg_1")
    assert w.sequence_number == 0 and w.item_id == "msg_1"
    w.sequence_number = 5
    frames = w.texts(["a", "b"]) + w.write("reasoning", "c", item_id="rs_1")
    assert [d["sequence_number"] for d in loads(frames)] == [5, 6, 7]
    assert [d["item_id"] for d in loads(frames)] == ["msg_1", "msg_1", "rs_1"]
    w.item_id = None
    with pytest.raises(TypeError, match="item_id must be a str, not NoneType"):
        w.text("d")
    assert w.sequence_number == 8
    with pytest.raises(TypeError, match="sequence_number must be an int"):
        w.sequence_number = "9"
    with pytest.raises(ValueError, match="Responses"):
        w.done()


def test_created_defaults_to_now(writer_twin: ModuleType) -> None:
    import time
    before = int(time.time())
    w = writer_twin.StreamWriter(VLLM, id="x", model="m")
    assert before <= data(w.text("a"))["created"] <= int(time.time())


def test_shape_and_frames() -> None:
    assert VLLM.api == "chat" and VLLM.name == "vllm" and VLLM.style == "pydantic"
    assert "text" in VLLM.frames and "done" in VLLM.frames
    assert repr(VLLM) == "StreamShape('chat', 'vllm', style='pydantic')"
    for api in ("chat", "completions", "responses", "messages"):
        with pytest.raises(ValueError, match="no built-in"):
            StreamShape(api, "nope")  # type: ignore[arg-type]


# --- bad input: the slot, frame or sentinel named

@pytest.mark.parametrize(("call", "error", "message"), [
    (lambda w: w.text(1), TypeError, "text must be a str, not int"),
    (lambda w: w.text(None), TypeError, "text must be a str, not NoneType"),
    (lambda w: w.text(b"x"), TypeError, "text must be a str, not bytes"),
    (lambda w: w.text("x", "0"), TypeError, "index must be an int, not str"),
    (lambda w: w.text("x", True), TypeError, "index must be an int, not bool"),
    (lambda w: w.text("x", 2**63), OverflowError, "index = 9223372036854775808 is outside"),
    (lambda w: w.text("x", 1.0), TypeError, "index must be an int, not float"),
    (lambda w: w.texts("abc"), TypeError, "texts must be an iterable of items, not str"),
    (lambda w: w.texts(5), TypeError, "texts must be an iterable, not int"),
    (lambda w: w.texts(["a", 5]), TypeError, "text must be a str, not int"),
    (lambda w: w.step("x", token_ids=[1, "2"]), TypeError, r"token_ids\[1\] must be an int"),
    (lambda w: w.step("x", token_ids=5), TypeError, "token_ids must be a list or tuple of ints"),
    (lambda w: w.step("x", token_ids=[2**64]), OverflowError, r"token_ids\[0\] = "),
    (lambda w: w.step("x", logprobs=5), TypeError, "logprobs must be a list or tuple"),
    (lambda w: w.step("x", logprobs=[("a",)]), ValueError, r"logprobs\[0\] must have 2 to 5"),
    (lambda w: w.step("x", logprobs=[(1, 0.5)]), TypeError, r"logprobs\[0\].token must be a str"),
    (lambda w: w.step("x", logprobs=[("a", "b")]), TypeError,
     r"logprobs\[0\].logprob must be a float, not str"),
    (lambda w: w.step("x", logprobs=[("a", 0.5, "ab")]), TypeError,
     r"logprobs\[0\].bytes must be a list or tuple of ints"),
    (lambda w: w.step("x", logprobs=[("a", 0.5, None, [("b", None)])]), TypeError,
     r"logprobs\[0\].top\[0\].logprob must be a float, not NoneType"),
    (lambda w: w.step("x", logprobs=[("a", 0.5, None, 7)]), TypeError,
     r"logprobs\[0\].top must be a list or tuple"),
    (lambda w: w.step("x", usage=(1, "2")), TypeError, "usage.completion_tokens must be an int"),
    (lambda w: w.step("x", usage=(1,)), ValueError, "usage must have 2 to 4 items"),
    (lambda w: w.step("x", usage=(2**62, 2**62)), OverflowError, "usage.total_tokens"),
    (lambda w: w.step("x", finish_reason=3), TypeError, "finish_reason must be a str, not int"),
    (lambda w: w.step("x", finish_reason="stop", stop_reason=1.5), TypeError,
     "stop_reason must be a str or an int, not float"),
    (lambda w: w.step("x", kind="nope"), ValueError, "kind must be 'text', 'reasoning'"),
    (lambda w: w.step("x", kind=1), TypeError, "kind must be a str, not int"),
    (lambda w: w.step("x", stop_reason="s"), ValueError,
     "the 'text' frame of this chat shape \\(vllm\\) has no stop_reason"),
    (lambda w: w.write("start", "x"), ValueError, "the 'start' frame .* has no text"),
    (lambda w: w.write("nope"), ValueError, "chat has no frame 'nope'"),
    (lambda w: w.write(5), TypeError, "frame must be a str, not int"),
    (lambda w: w.write("tool_start", tool_index=0, tool_id="c", tool_name=None), TypeError,
     "tool_name must be a str, not NoneType"),
    (lambda w: w.usage(1, None), TypeError, "usage.completion_tokens must be an int"),
    (lambda w: w.steps([5]), TypeError, r"steps\[0\] must be a tuple, not int"),
    (lambda w: w.steps([("a", None)]), TypeError, "index must be an int, not NoneType"),
    (lambda w: w.step("a", None), TypeError, "index must be an int, not NoneType"),
    (lambda w: w.write("text", "a", None), TypeError, "index must be an int, not NoneType"),
    (lambda w: w.steps([("a", 0, "text", None, None, None, None, None, None, None)]), ValueError,
     r"steps\[0\] must have 0 to 9 items"),
])
def test_bad_values(writer_twin: ModuleType, call: Any, error: type[Exception],
                    message: str) -> None:
    w = make(writer_twin)
    before = w.sequence_number
    with pytest.raises(error, match=message):
        call(w)
    assert w.sequence_number == before
    assert w.text("ok")  # the writer goes on


def test_a_frame_the_shape_has_not(writer_twin: ModuleType) -> None:
    w = make(writer_twin, StreamShape("chat", "sglang"))
    with pytest.raises(ValueError, match="this chat shape \\(sglang\\) has no 'tool_start' "
                                         "frame: give its probe"):
        w.write("tool_start", tool_id="c", tool_name="f")


@pytest.mark.parametrize(("kw", "message"), [
    ({"id": 1}, "id must be a str, not int"),
    ({"model": None}, "model must be a str, not NoneType"),
    ({"created": "now"}, "created must be an int, not str"),
    ({"created": 2**70}, "created = .* is outside the int64 range"),
    ({"system_fingerprint": 5}, "system_fingerprint must be a str, not int"),
    ({"role": 0}, "role must be a str, not int"),
])
def test_bad_constants(writer_twin: ModuleType, kw: dict[str, Any], message: str) -> None:
    with pytest.raises((TypeError, OverflowError), match=message):
        make(writer_twin, **kw)


def test_bad_shape_argument(writer_twin: ModuleType) -> None:
    with pytest.raises(TypeError, match="shape must be a StreamShape, not str"):
        writer_twin.StreamWriter("chat", id="x", model="m", created=1)


@pytest.mark.parametrize(("args", "kw", "error", "message"), [
    (("chat", {"text": TEXT_PROBE.replace("<<text>>", "hi")}), {}, ValueError,
     "the 'text' probe has no sentinel of text"),
    (("chat", {"text": TEXT_PROBE.replace('"<<id>>"', '"<<text>>"')}), {}, ValueError,
     "the sentinel of text is in it twice"),
    (("chat", {"text": TEXT_PROBE[:-1]}), {}, ValueError, "the 'text' probe: its data is not JSON"),
    (("chat", {"text": b"\xff"}), {}, ValueError, "the 'text' probe is not UTF-8"),
    (("chat", {"text": 5}), {}, TypeError, "the 'text' probe must be str or bytes"),
    (("chat", {"text": '{"c":"x<<text>>"}'}), {}, ValueError, "inside the string"),
    (("chat", {"start": TEXT_PROBE}), {}, ValueError, "a start frame of chat has no text"),
    (("chat", {"nope": TEXT_PROBE}), {}, ValueError, "chat has no frame 'nope'"),
    (("chat", {"finish": '{"finish_reason":"<<finish_reason>>"}'}), {}, ValueError,
     "the probes have no 'text' frame"),
    (("chat", {"text": TEXT_PROBE}), {"style": "yaml"}, ValueError, "style must be one of"),
    (("chat", {"text": TEXT_PROBE}), {"style": 5}, TypeError, "style must be a str"),
    (("chat", {"text": TEXT_PROBE}), {"omit_none": "usage"}, TypeError,
     "omit_none must be a bool or a collection"),
    (("chat", {"text": TEXT_PROBE}), {"omit_none": ["text"]}, ValueError,
     "omit_none: 'text' is not a slot that may be None"),
    (("chat", {"text": '{"f":"<<finish_reason>>","t":"<<text>>"}'}), {"omit_none": True},
     ValueError, "the member 'f' cannot be left out"),
    (("chat", {"text": '{"t":"<<text>>","l":[{"a":"<<lp_token>>"},{"a":"x"}]}'}), {},
     ValueError, "must hold exactly one item"),
    (("chat", {"text": 'data: [DONE]\n\n'}), {}, ValueError, "none of its sentinels"),
    (("chat", {"text": 'event: x\n\n'}), {}, ValueError, "without a data line"),
    (("messages", {"text": '{"delta":"<<text>>"}'}), {}, ValueError, 'needs its "type"'),
    (("chat", "vllm"), {"style": "json"}, TypeError, "a built-in shape takes no style"),
    (("chat", 5), {}, TypeError, "probes must be a built-in shape's name or a mapping"),
    (("soap", "vllm"), {}, ValueError, "api must be one of"),
    ((5, "vllm"), {}, TypeError, "api must be a str"),
])
def test_bad_probes(args: tuple[Any, ...], kw: dict[str, Any], error: type[Exception],
                    message: str) -> None:
    with pytest.raises(error, match=message):
        StreamShape(*args, **kw)


def test_probe_frames_keep_their_framing(writer_twin: ModuleType) -> None:
    """A whole SSE frame as a probe: its lines and blank line are the server's."""
    probe = f'id: 1\ndata:{{"t":"{PROBE.text}","i":{PROBE.index}}} \r\n\r\n'
    w = make(writer_twin, StreamShape("chat", {"text": probe}))
    assert w.text("é", 2) == 'id: 1\ndata:{"t":"é","i":2} \r\n\r\n'.encode()


def test_json_dumps_spacing(writer_twin: ModuleType) -> None:
    """A probe json.dumps wrote with its default separators: lists the same way."""
    probe = json.dumps({"t": PROBE.text, "ids": list(PROBE.token_ids),
                        "l": {"content": [{"token": PROBE.lp_token, "lp": PROBE.lp_logprob,
                                           "top": [{"token": PROBE.top_token,
                                                    "lp": PROBE.top_logprob}]}]}})
    w = make(writer_twin, StreamShape("chat", {"text": probe}, style="json"))
    entries = [("a", -0.5, None, [("b", -1.0), ("c", -2.0)]), ("d", -1e-05, None, [])]
    got = w.step("é", token_ids=[1, 2, 3], logprobs=entries)
    want = json.dumps({"t": "é", "ids": [1, 2, 3], "l": {"content": [
        {"token": "a", "lp": -0.5, "top": [{"token": "b", "lp": -1.0},
                                          {"token": "c", "lp": -2.0}]},
        {"token": "d", "lp": -1e-05, "top": []}]}})
    assert got == b"data: " + want.encode() + b"\n\n"


@settings(max_examples=examples(200))
@given(data_=st.data())
def test_every_frame_parses(writer_twin: ModuleType, data_: st.DataObject) -> None:
    """Fuzzed values in every shape and frame: each frame's data is JSON (never invalid),
    with the text and floats it was given."""
    api, name = data_.draw(st.sampled_from([("chat", "vllm"), ("chat", "trtllm"),
                                            ("chat", "sglang"), ("chat", "openai"),
                                            ("completions", "vllm"),
                                            ("completions", "openai")]))
    w = make(writer_twin, StreamShape(api, name))  # type: ignore[arg-type]
    text = data_.draw(st.text(st.characters(blacklist_categories=("Cs",))))
    value = data_.draw(st.floats())
    entries = [(text, value, text.encode(), [(text, value)], 0)]
    frame = w.step(text, logprobs=entries)
    (parsed,) = loads(frame)
    choice = parsed["choices"][0]
    assert choice.get("text", (choice.get("delta") or {}).get("content")) == text
    logprob = (choice["logprobs"].get("content") or [{}])[0].get("logprob") \
        if "content" in choice["logprobs"] else choice["logprobs"]["token_logprobs"][0]
    assert logprob == value or (logprob is None and not math.isfinite(value))


# --- the compiled twin's kernels: each writes what the Python twin writes

ALPHABET = ["a", " ", "~", '"', "\\", "\n", "\x00", "\x1f", "\x7f", "\x80", "é", "ÿ", "Ā", "中",
            "\u2028", "\uffff", "😀", "\U0010ffff"]


@_twins.SWITCHES_KERNELS
@pytest.mark.parametrize("style", ["pydantic", "json"])
def test_every_kernel_writes_the_same(style: str) -> None:
    """Texts of each width (ASCII, Latin-1, UCS-2, UCS-4) with each kind of character at
    every place of a 16- and 32-byte vector and of the tail, on every kernel."""
    compiled = _twins.twin("writer", "c")
    shape = StreamShape("chat", {"text": TEXT_PROBE}, style=style)  # type: ignore[arg-type]
    reference = make(_writer_py, shape)
    texts = []
    for widest in ("a", "é", "中", "😀"):
        for special in ALPHABET:
            for length in (1, 15, 16, 17, 31, 32, 33, 63, 64, 65, 100):
                for at in {0, length // 2, length - 1}:
                    chars = [widest if i % 7 == 3 else "x" for i in range(length)]
                    chars[at] = special
                    texts.append("".join(chars))
    before = compiled._kernel()
    try:
        for kernel in compiled._kernels():
            compiled._use_kernel(kernel)
            w = make(compiled, shape)
            for text in texts:
                assert w.text(text) == reference.text(text), (kernel, text)
            assert w.texts(texts) == reference.texts(texts)
    finally:
        compiled._use_kernel(before)
    with pytest.raises(ValueError, match="no kernel 'avx9'"):
        compiled._use_kernel("avx9")


def test_the_buffer_is_given_back(writer_twin: ModuleType) -> None:
    """A frame of a large text leaves no buffer of its size behind (memory is bounded)."""
    import tracemalloc
    w = make(writer_twin)
    w.text("x" * 10)
    tracemalloc.start()
    try:
        baseline = tracemalloc.get_traced_memory()[0]
        out = w.text("é\n" * 2_000_000)
        assert len(out) > 6_000_000
        del out
        assert tracemalloc.get_traced_memory()[0] - baseline < 100_000
    finally:
        tracemalloc.stop()


def test_one_call_at_a_time(writer_twin: ModuleType) -> None:
    """A call made while another runs on the same writer (here: a text iterable that writes
    with it) is refused, and the writer goes on."""
    w = make(writer_twin)
    inner: list[BaseException] = []

    class Texts:
        def __iter__(self) -> Any:
            try:
                w.text("inner")
            except RuntimeError as exc:
                inner.append(exc)
            yield "outer"

    assert w.texts(Texts()) == w.text("outer")
    assert not inner  # (the texts are read before the call takes the writer)
    with pytest.raises(TypeError):
        w.texts(Texts(), "0")  # type: ignore[arg-type]
    assert w.text("ok")


# a Responses stream's calls: a text delta or several (the compiled twin's split around the
# sequence number and the text; a lone surrogate, a text not a str), the item or the
# sequence number changed, another frame between
RESPONSES_CALLS = st.lists(st.one_of(
    st.tuples(st.just("text"), st.text(st.sampled_from(["a", " ", '"', "\\", "\n", "é", "😀"]),
                                       max_size=8), st.sampled_from([0, 0, 1])),
    st.tuples(st.just("texts"), st.lists(st.one_of(
        st.text(st.sampled_from(["a", '"', "\n", "é", "😀", "\ud800"]), max_size=4),
        st.just(5)), max_size=4), st.sampled_from([0, 0, 1])),
    st.tuples(st.just("item"), st.sampled_from(["msg_1", "msg_\"2", "é", None])),
    st.tuples(st.just("seq"), st.sampled_from([0, 9, 10, 99, 2**31, 2**63 - 2])),
    st.tuples(st.just("reasoning"), st.just("r"))), max_size=12)


def _delta_probe(kind: str = "output_text") -> str:
    """A Responses delta as pydantic dumps the openai package's model: its members in
    alphabetical order, the text before the sequence number (OpenAI's wire order has it
    after; the bytes against the model itself: test_writer_shapes.py)."""
    P = PROBE
    return (f'{{"content_index":{P.content_index},"delta":"{P.text}","item_id":"{P.item_id}",'
            f'"logprobs":[],"output_index":{P.index},"sequence_number":{P.sequence_number},'
            f'"type":"response.{kind}.delta"}}')


@pytest.mark.parametrize("order", ["wire", "pydantic"])
@settings(max_examples=examples(200))
@given(calls=RESPONSES_CALLS)
def test_responses_deltas_both_twins(order: str, calls: list[Any]) -> None:
    """The compiled twin's Responses deltas (their numbers and texts written between the
    frame's three parts, in either order) are the Python twin's frames, whatever item and number the
    stream is at."""
    compiled = _twins.twin("writer", "c")
    shape = StreamShape("responses", "openai") if order == "wire" else StreamShape(
        "responses", {"text": _delta_probe(), "reasoning": _delta_probe("reasoning_text")})
    writers = [make(twin, shape, item_id="msg_0") for twin in (compiled, _writer_py)]
    for call in calls:
        outcomes = []
        for w in writers:
            try:
                if call[0] == "text":
                    outcomes.append(w.text(call[1], call[2]))
                elif call[0] == "texts":
                    outcomes.append(w.texts(call[1], call[2]))
                elif call[0] == "item":
                    w.item_id = call[1]
                elif call[0] == "seq":
                    w.sequence_number = call[1]
                else:
                    outcomes.append(w.write("reasoning", call[1], item_id="rs_1"))
            except (TypeError, ValueError, OverflowError) as exc:
                outcomes.append(repr(exc))
        assert outcomes[:1] == outcomes[1:], call
        assert writers[0].sequence_number == writers[1].sequence_number


def test_the_last_sequence_number(writer_twin: ModuleType) -> None:
    """An event at 2**63 - 1 would leave the next number outside int64: refused
    (OverflowError), the writer unchanged; the one before is written."""
    w = make(writer_twin, StreamShape("responses", "openai"), item_id="msg_1")
    w.sequence_number = 2**63 - 2
    assert loads(w.text("a"))[0]["sequence_number"] == 2**63 - 2
    message = r"sequence_number = 9223372036854775807: the next event's would be outside"
    for call in (lambda: w.text("b"), lambda: w.texts(["b", "c"]),
                 lambda: w.write("reasoning", "r", item_id="rs_1"), lambda: w.text("é")):
        with pytest.raises(OverflowError, match=message):
            call()
        assert w.sequence_number == 2**63 - 1
    w.sequence_number = 0
    assert loads(w.text("c"))[0]["sequence_number"] == 0
