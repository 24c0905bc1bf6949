"""The stream writer against the ways the stacks write a streamed chunk today: a pydantic
model built and dumped per chunk (the openai package's own ChatCompletionChunk, as vLLM,
TensorRT-LLM and SGLang do with theirs), a template split from a probe chunk with the text
put in by json.dumps (vLLM PR #52875), a msgspec Struct encoded (SGLang), orjson of a dict.

The writer's shape is made from probes the same ChatCompletionChunk wrote, so tokcore and
the pydantic baseline write the same bytes (checked first). The cases: one text chunk, a
chunk with one token's 20 top logprobs, 16 steps of a stream in one call against 16 calls,
one Responses text delta (its shape made from the openai package's ResponseTextDeltaEvent,
against that model built and dumped), 16 of them in one call against 16 calls, and a 64 KiB
text escaped (ASCII, and mixed UTF-8: accents, CJK, emoji), whose throughput in GB/s of UTF-8
text report.py prints (``input_bytes``) and checks (``RATE_TARGETS``).
"""

from __future__ import annotations

import json
import random
import re
from typing import Any

from _common import FAST, REFERENCE, Target, add, make_runner

from tokcore import PROBE, StreamShape
from tokcore.writer import _writer_c, _writer_py

ID, MODEL = "chatcmpl-8f3c2a1b4d5e6f708192a3b4c5d6e7f8", "Qwen/Qwen2.5-7B-Instruct"
CREATED = 1732000000
TOKEN = " the"
PYDANTIC = "pydantic build + model_dump_json (openai ChatCompletionChunk)"
TEMPLATE = "template: probe split + json.dumps (vLLM #52875)"
MSGSPEC = "msgspec Struct build + encode (SGLang)"
ORJSON = "orjson.dumps of a dict"
SINGLE = "16 text() calls (tokcore-c)"
PYDANTIC_DELTA = "pydantic build + model_dump_json (openai ResponseTextDeltaEvent)"
ITEM = "msg_8f3c2a1b4d5e6f708192a3b4c5d6e7f8"

TEXT = "one text chunk"
LOGPROBS = "a chunk with 20 top logprobs"
BATCH = "16 steps of one stream in one call"
DELTA = "one Responses text delta"
BATCH_DELTA = "16 Responses deltas in one call"
ASCII = "a 64 KiB ASCII text escaped"
MIXED = "a 64 KiB mixed UTF-8 text escaped"

# The goals (issue 37), in the same run: the level to reach
TARGETS = [
    Target(TEXT, PYDANTIC, 30),
    Target(TEXT, TEMPLATE, 5),
    Target(TEXT, MSGSPEC, 5),
    Target(LOGPROBS, PYDANTIC, 20),
    Target(BATCH, SINGLE, 1.5),  # a batched step is cheaper than a single one
    Target(DELTA, PYDANTIC_DELTA, 30),  # (the chat chunk's goal)
    Target(BATCH_DELTA, SINGLE, 1.5),  # (the chat batch's goal)
]
#: GB/s of UTF-8 text the escape must reach (report.py checks them)
RATE_TARGETS = {ASCII: 2.0, MIXED: 1.0}

WORDS = ("the model writes each token of its answer as a chunk , and the server sends "
         "it on : \" quotes \" and new\nlines , 42 % of them").split(" ")
MIXED_WORDS = ["the", "modèle", "écrit", "chaque", "token", "模型", "生成", "每个", "词元", "😀",
               "naïve", "café", "Größe", "ответ", "и", "سلام", "\n", "\"ok\"", "🎉"]


def text_of(words: list[str], size: int, seed: int) -> str:
    rng = random.Random(seed)
    out, n = [], 0
    while n < size:
        word = rng.choice(words)
        out.append(word)
        n += len(word.encode()) + 1
    return " ".join(out)[:size]


def utf8_size(text: str) -> int:
    return len(text.encode())


def input_bytes() -> dict[str, int]:
    return {ASCII: utf8_size(text_of(WORDS, 65536, 1)),
            MIXED: utf8_size(text_of(MIXED_WORDS, 65536, 2))}


def tops(n: int) -> list[tuple[str, float, bytes]]:
    rng = random.Random(3)
    out = []
    for i in range(n):
        token = f" tok{i}"
        out.append((token, -rng.random() * 12, token.encode()))
    return out


# --- the stacks' ways


def openai_chunk(text: str, entries: Any = None) -> Any:
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta, ChoiceLogprobs
    from openai.types.chat.chat_completion_token_logprob import (
        ChatCompletionTokenLogprob,
        TopLogprob,
    )

    logprobs = None if entries is None else ChoiceLogprobs(content=[ChatCompletionTokenLogprob(
        token=token, logprob=logprob, bytes=list(raw),
        top_logprobs=[TopLogprob(token=t, logprob=lp, bytes=list(b)) for t, lp, b in top])
        for token, logprob, raw, top in entries])
    return ChatCompletionChunk(id=ID, object="chat.completion.chunk", created=CREATED,
                               model=MODEL, choices=[Choice(index=0, delta=ChoiceDelta(
                                   content=text), logprobs=logprobs, finish_reason=None)])


def pydantic_frame(text: str, entries: Any = None) -> str:
    """What the stacks do per chunk: build the models, dump them, frame the text."""
    return f"data: {openai_chunk(text, entries).model_dump_json(exclude_unset=True)}\n\n"


def probes() -> dict[str, str]:
    """The same models with the sentinels (model_construct: Literal fields take them)."""
    from openai.types.chat import ChatCompletionChunk
    from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta, ChoiceLogprobs
    from openai.types.chat.chat_completion_token_logprob import (
        ChatCompletionTokenLogprob,
        TopLogprob,
    )

    lp = ChoiceLogprobs.model_construct(content=[ChatCompletionTokenLogprob.model_construct(
        token=PROBE.lp_token, logprob=PROBE.lp_logprob, bytes=list(PROBE.lp_bytes),
        top_logprobs=[TopLogprob.model_construct(token=PROBE.top_token,
                                                 logprob=PROBE.top_logprob,
                                                 bytes=list(PROBE.top_bytes))])])
    choice = Choice.model_construct(index=PROBE.index, delta=ChoiceDelta.model_construct(
        content=PROBE.text), logprobs=lp, finish_reason=None)
    chunk = ChatCompletionChunk.model_construct(
        id=PROBE.id, object="chat.completion.chunk", created=PROBE.created, model=PROBE.model,
        choices=[choice])
    return {"text": chunk.model_dump_json(exclude_unset=True)}


def delta_event(text: str, sequence_number: int) -> Any:
    from openai.types.responses import ResponseTextDeltaEvent

    return ResponseTextDeltaEvent(content_index=0, delta=text, item_id=ITEM, logprobs=[],
                                  output_index=0, sequence_number=sequence_number,
                                  type="response.output_text.delta")


def pydantic_delta(text: str, sequence_number: int) -> str:
    """What a server on the openai package's models does per Responses delta (vLLM's
    /v1/responses): build the event, dump it, frame it with its event line."""
    event = delta_event(text, sequence_number)
    return f"event: {event.type}\ndata: {event.model_dump_json(exclude_unset=True)}\n\n"


def delta_probe() -> str:
    from openai.types.responses import ResponseTextDeltaEvent

    return str(ResponseTextDeltaEvent.model_construct(
        content_index=PROBE.content_index, delta=PROBE.text, item_id=PROBE.item_id,
        logprobs=[], output_index=PROBE.index, sequence_number=PROBE.sequence_number,
        type="response.output_text.delta").model_dump_json(exclude_unset=True, warnings=False))


class Template:
    """vLLM #52875's way: one probe chunk dumped per stream (the same models, with sentinels)
    and split on them; each frame the constant parts around the index and json.dumps of
    the text, in the order the dump has them."""

    def __init__(self) -> None:
        from openai.types.chat import ChatCompletionChunk
        from openai.types.chat.chat_completion_chunk import Choice, ChoiceDelta

        probe = ChatCompletionChunk(
            id=ID, object="chat.completion.chunk", created=CREATED, model=MODEL,
            choices=[Choice(index=987654301, delta=ChoiceDelta(content="<<text>>"),
                            logprobs=None, finish_reason=None)]
        ).model_dump_json(exclude_unset=True)
        first, middle, last = re.split(r'"<<text>>"|987654301', probe)
        self.parts = ("data: " + first, middle, last + "\n\n")
        self.text_first = probe.index("<<text>>") < probe.index("987654301")

    def frame(self, text: str, index: int = 0) -> str:
        a, b, c = self.parts
        quoted = json.dumps(text, ensure_ascii=False)
        if self.text_first:
            return f"{a}{quoted}{b}{index}{c}"
        return f"{a}{index}{b}{quoted}{c}"


def msgspec_way() -> Any:
    import msgspec

    class Delta(msgspec.Struct, omit_defaults=True):
        reasoning_content: str | None
        role: str | None = None
        content: str | None = None

    class Choice(msgspec.Struct):
        index: int
        delta: Delta
        logprobs: dict[str, Any] | None = None
        finish_reason: str | None = None
        matched_stop: int | str | None = None

    class Chunk(msgspec.Struct, omit_defaults=True):
        id: str
        object: str
        created: int
        model: str
        choices: list[Choice]
        usage: dict[str, Any] | None = None

    encoder = msgspec.json.Encoder()

    def frame(text: str) -> bytes:
        chunk = Chunk(id=ID, object="chat.completion.chunk", created=CREATED, model=MODEL,
                      choices=[Choice(index=0, delta=Delta(reasoning_content=None,
                                                           content=text))])
        return b"data: " + encoder.encode(chunk) + b"\n\n"
    return frame


def orjson_way(text: str) -> bytes:
    import orjson

    return b"data: " + orjson.dumps({
        "id": ID, "object": "chat.completion.chunk", "created": CREATED, "model": MODEL,
        "choices": [{"index": 0, "delta": {"content": text}, "logprobs": None,
                     "finish_reason": None}]}) + b"\n\n"


def add_batch(runner: Any, case: str, writer: Any, texts: list[str], baseline: str,
              write_baseline: Any) -> None:
    """The texts in one texts() call, in as many text() calls, and the baseline's way."""
    text = writer.text

    def single() -> None:
        for t in texts:
            text(t)
    add(runner, case, FAST, writer.texts, texts)
    add(runner, case, SINGLE, single)
    add(runner, case, baseline, write_baseline)


def main() -> None:
    runner = make_runner()
    shape = StreamShape("chat", probes(), style="pydantic")
    fast = _writer_c.StreamWriter(shape, id=ID, model=MODEL, created=CREATED)
    ref = _writer_py.StreamWriter(shape, id=ID, model=MODEL, created=CREATED)
    template = Template()
    msgspec_frame = msgspec_way()
    entries = [(TOKEN, -0.0123, TOKEN.encode(), tops(20))]

    # the same bytes first
    for text in (TOKEN, 'é "q"\n', "中文 😀"):
        want = pydantic_frame(text).encode()
        assert fast.text(text) == ref.text(text) == want == template.frame(text).encode()
    want = pydantic_frame(TOKEN, entries).encode()
    assert fast.step(TOKEN, logprobs=entries) == ref.step(TOKEN, logprobs=entries) == want

    add(runner, TEXT, FAST, fast.text, TOKEN)
    add(runner, TEXT, REFERENCE, ref.text, TOKEN)
    add(runner, TEXT, PYDANTIC, pydantic_frame, TOKEN)
    add(runner, TEXT, TEMPLATE, template.frame, TOKEN)
    add(runner, TEXT, MSGSPEC, msgspec_frame, TOKEN)
    add(runner, TEXT, ORJSON, orjson_way, TOKEN)

    step = fast.step
    add(runner, LOGPROBS, FAST, lambda: step(TOKEN, logprobs=entries))
    add(runner, LOGPROBS, REFERENCE, lambda: ref.step(TOKEN, logprobs=entries))
    add(runner, LOGPROBS, PYDANTIC, pydantic_frame, TOKEN, entries)

    responses = StreamShape("responses", {"text": delta_probe()}, style="pydantic")
    fast_delta, ref_delta = (twin.StreamWriter(responses, id="resp_1", model=MODEL,
                                               created=CREATED, item_id=ITEM)
                             for twin in (_writer_c, _writer_py))
    for number, text in enumerate((TOKEN, 'é "q"\n', "中文 😀")):
        want = pydantic_delta(text, number).encode()
        assert fast_delta.text(text) == ref_delta.text(text) == want
    texts = [" " + word for word in text_of(WORDS, 120, 4).split(" ")][:16]
    assert len(texts) == 16
    assert fast_delta.texts(texts) == ref_delta.texts(texts) == "".join(
        pydantic_delta(t, 3 + k) for k, t in enumerate(texts)).encode()
    add(runner, DELTA, FAST, fast_delta.text, TOKEN)
    add(runner, DELTA, REFERENCE, ref_delta.text, TOKEN)
    add(runner, DELTA, PYDANTIC_DELTA, pydantic_delta, TOKEN, 1000)

    assert fast.texts(texts) == b"".join(fast.text(t) for t in texts)
    add_batch(runner, BATCH, fast, texts, PYDANTIC, lambda: [pydantic_frame(t) for t in texts])
    add_batch(runner, BATCH_DELTA, fast_delta, texts, PYDANTIC_DELTA,
              lambda: [pydantic_delta(t, 1000 + k) for k, t in enumerate(texts)])

    for case, words, seed in ((ASCII, WORDS, 1), (MIXED, MIXED_WORDS, 2)):
        big = text_of(words, 65536, seed)
        assert fast.text(big) == ref.text(big) == pydantic_frame(big).encode()
        add(runner, case, FAST, fast.text, big)
        add(runner, case, TEMPLATE, template.frame, big)
        add(runner, case, ORJSON, orjson_way, big)


if __name__ == "__main__":
    main()
