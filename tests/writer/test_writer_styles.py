"""The stream writer's strings and floats, byte for byte as each serializer writes them:
pydantic-core (model_dump_json), orjson, msgspec, json.dumps with and without ensure_ascii,
over a corpus of every escape class and hypothesis's text and floats; a lone surrogate is
refused as each serializer refuses it (json.dumps' ASCII escapes it)."""

from __future__ import annotations

import json
import math
import struct
from collections.abc import Callable
from types import ModuleType
from typing import Any

import msgspec
import orjson
import pytest
from _budget import examples
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

import tokcore

#: one frame holding a string and a float where the serializers put them: a text and one
#: logprob entry (the float's slot), in each style
PROBE = '{"c":"<<text>>","l":[{"t":"<<lp_token>>","p":-987654.25}]}'


class _Entry(BaseModel):
    t: str
    p: float


class _Frame(BaseModel):
    c: str
    l: list[_Entry]  # noqa: E741


def _pydantic(obj: dict[str, object]) -> bytes:
    return _Frame.model_validate(obj).model_dump_json().encode()


def _json_unicode(obj: dict[str, object]) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


#: each style's serializer, as a server calls it
SERIALIZERS: dict[str, Callable[[dict[str, object]], bytes]] = {
    "pydantic": _pydantic,
    "orjson": orjson.dumps,
    "msgspec": msgspec.json.encode,
    "json": lambda obj: json.dumps(obj, separators=(",", ":")).encode(),
    "json_unicode": _json_unicode,
}
STYLES = tuple(SERIALIZERS)

#: every class of character a string escape treats apart
CORPUS = [
    "", "plain ascii", " the", 'quote " and backslash \\', "/slash/", "\x00\x01\x07\x08\t\n\x0b",
    "\x0c\r\x0e\x1b\x1f", " \x7f DEL", "\x80\x9f\xa0\xff latin-1", "é à ü ß", "\u0100\u07ff",
    "\u0800 \u2028 \u2029 \ufeff \uffff", "中文字符", "emoji 😀 🎉 \U0010ffff", "mixed é😀\n\"x\"",
    "<script>&amp;</script>", "a" * 100, "é" * 50, "\n" * 40, "tab\tsep\tvalues",
    "x" * 31 + '"' + "y" * 40, "z" * 63 + "\\", "ok" * 33 + "\x1f",
]
SURROGATES = ["\ud800", "\udfff", "a\udc80b", "\ud83d", "ok \ude00 tail", "😀\ud800"]
FLOATS = [0.0, -0.0, 1.0, -1.5, -9.999e-05, -0.00001, -1e-5, -1e-6, -1e-7, -1.2345e-6,
          -0.0001, -0.001, -0.1, -9999.0, -123456789.0, 1e15, 1e16, 1.5e16, 9999999999999998.0,
          1e21, 1e22, 1e100, -1e-100, 5e-324, -2.2250738585072014e-308,
          1.7976931348623157e308, -2.220446049250313e-16, -0.0123456789012345678,
          float("inf"), float("-inf"), float("nan"), -0.6931471805599453, -2.3025850929940455]


def writer(twin: ModuleType, style: str) -> Any:
    shape = tokcore.StreamShape("chat", {"text": PROBE}, style=style)  # type: ignore[arg-type]
    return twin.StreamWriter(shape, id="x", model="m", created=1)


def expected(style: str, text: str, value: float) -> bytes:
    obj = {"c": text, "l": [{"t": "t", "p": value}]}
    return b"data: " + SERIALIZERS[style](obj) + b"\n\n"


def written(twin: ModuleType, style: str, text: str, value: float) -> bytes:
    return writer(twin, style).write("text", text, logprobs=[("t", value)])  # type: ignore[no-any-return]


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("text", CORPUS)
def test_string_corpus(writer_twin: ModuleType, style: str, text: str) -> None:
    assert written(writer_twin, style, text, -0.5) == expected(style, text, -0.5)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("value", FLOATS, ids=repr)
def test_float_corpus(writer_twin: ModuleType, style: str, value: float) -> None:
    assert written(writer_twin, style, "t", value) == expected(style, "t", value)


@pytest.mark.parametrize("style", STYLES)
@pytest.mark.parametrize("text", SURROGATES, ids=ascii)
def test_lone_surrogates(writer_twin: ModuleType, style: str, text: str) -> None:
    """Refused as the serializer refuses it: orjson with a TypeError, pydantic-core (its
    PydanticSerializationError) and msgspec with a ValueError (ours a UnicodeEncodeError, as
    msgspec's and a json.dumps(ensure_ascii=False) text's when encoded); json.dumps' ASCII
    writes the escape."""
    try:
        want: bytes | type[Exception] = expected(style, text, -0.5)
    except TypeError:
        want = TypeError
    except ValueError:
        want = ValueError
    if isinstance(want, bytes):
        assert written(writer_twin, style, text, -0.5) == want
        return
    with pytest.raises(want) as info:
        written(writer_twin, style, text, -0.5)
    assert "surrogates not allowed" in str(info.value)
    assert "text" in str(info.value)  # the slot named


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=examples(300))
@given(text=st.text(), value=st.floats())
def test_any_text_and_float(writer_twin: ModuleType, style: str, text: str, value: float) -> None:
    try:
        want = expected(style, text, value)
    except (TypeError, ValueError):  # a lone surrogate: refused by both
        with pytest.raises((TypeError, ValueError)):
            written(writer_twin, style, text, value)
        return
    assert written(writer_twin, style, text, value) == want


@pytest.mark.parametrize("style", STYLES)
@settings(max_examples=examples(500))
@given(bits=st.integers(0, 2**64 - 1))
def test_any_double(writer_twin: ModuleType, style: str, bits: int) -> None:
    """Every double (its bit pattern drawn), written as the serializer writes it."""
    value = struct.unpack("<d", struct.pack("<Q", bits))[0]
    assert written(writer_twin, style, "t", value) == expected(style, "t", value)


@pytest.mark.parametrize("style", STYLES)
def test_float_boundaries(writer_twin: ModuleType, style: str) -> None:
    """Each power of ten and its neighbours, where the decimal and exponent forms meet."""
    values = []
    for exp in range(-30, 30):
        base = 10.0 ** exp
        values += [base, math.nextafter(base, 0), math.nextafter(base, math.inf), -base]
    w = writer(writer_twin, style)
    for value in values:
        got = w.write("text", "t", logprobs=[("t", value)])
        assert got == expected(style, "t", value), value


def test_ints_are_floats_in_a_float_slot(writer_twin: ModuleType) -> None:
    """An int logprob is written as the float it is (pydantic's float field does so)."""
    for style in STYLES:
        assert written(writer_twin, style, "t", -3) == expected(style, "t", -3.0)
