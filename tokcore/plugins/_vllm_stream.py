"""vLLM's stream generators replaced, for the requests they cover whole: each step written by
the stream writer straight from the engine's ``RequestOutput`` s (the plugin's ``generator``
mode; ``tokcore.plugins.vllm`` is the entry point and the switch).

``install_generators`` sets ``chat_completion_stream_generator`` of vLLM's
``OpenAIServingChat`` and ``completion_stream_generator`` of ``OpenAIServingCompletion`` to
functions that decide, per request and before the first byte, whether this module writes the
stream or vLLM's own generator does (called as it is, untouched). No chunk object is built and
pydantic writes nothing (the usage vLLM hands its middleware at the end is still its
``UsageInfo``); the bytes are vLLM's, byte for byte, but for ``id`` and ``created`` being
whatever vLLM makes them.

Chat Completions: covered when the server has no tool or reasoning parser
(``parser_cls is None``) and does not log outputs (``--enable-log-outputs``), the serving
object is vLLM's own class (not a subclass), the request asks no ``return_prompt_text``, its
``echo`` (if any) echoes nothing (the last message's role is not the answer's, or its content
is empty), and, when it asks for usage (``stream_options.include_usage`` or
``--enable-force-include-usage``), the server has neither ``--enable-prompt-tokens-details``
nor per-request metrics. Any ``n``; ``stream_options`` (usage, continuous usage);
``return_token_ids``; ``logprobs`` with any ``top_logprobs`` (-1 too), ``logprob_token_ids``,
``return_tokens_as_token_ids`` (the request's or the server's); stop strings and token ids;
the ``system_fingerprint`` where vLLM puts it.

Completions: covered when the serving object is vLLM's own class, the request does not ask
``echo`` with ``logprobs`` (the echoed prompt's first token has a null logprob), and, when
usage is asked, the server has no per-request metrics. Any ``n``, several prompts, ``echo``
(without logprobs; ``max_tokens=0`` too), ``stream_options``, ``return_token_ids``,
``logprobs`` (0 to -1, ``logprob_token_ids``, ``return_tokens_as_token_ids``, the text
offsets), ``--enable-prompt-tokens-details`` (the cached tokens on the usage chunk).

Within a covered stream, a step the writer has no frame for (a logprobs position without the
sampled token's entry, or without its decoded text: not seen from vLLM's engine) and a final
usage chunk carrying speculative decoding metrics are written by vLLM's own models, as vLLM
writes them. An error is vLLM's error chunk, and where one output of a step raises (an
``"error"`` finish; a completion's sampled token missing from its logprobs), the chunks of the
step's outputs before it are written first, as vLLM's generator writes them.

Logprobs: vLLM's logprobs processor (the API server's output processor) decodes every top
token of every step alone (``convert_ids_list_to_tokens``: one ``tokenizer.decode([id])``
each). For the covered requests its sample logprobs take the texts from a
:class:`TokenTable` instead: each id's text as that function gives it, made once per
tokenizer and vocabulary (filled as ids are met; a vocabulary grown by ``add_tokens`` gets
a new table for the requests made since); a text ending in U+FFFD is still corrected from the
sampled tokens before it by vLLM's own code (``_correct_decoded_token``: up to 9 decodes
through the tokenizer pool), its result kept in the table by the id and the (at most 4)
sampled ids before it, all that code reads. The covered requests are told from the others by
a mark set in the stream's task only while it awaits its result generator's first step, where
vLLM adds the engine requests (``_mark``): every other engine request of that task, before
or after, gets vLLM's own processor. Each position is kept as a record of what vLLM
would build its dict of ``Logprob`` objects from (the ids, logprobs, texts, rank and
``num_logprobs``), read by this module's generators as that dict and made into it only for
vLLM's own models (the steps above they write).

It was written against vLLM 0.32.0 and is installed only where what it was checked against
is what runs (``install_generators``): ``CHECKED`` holds the sha256 of the source of every
vLLM function or class whose behaviour it reproduces, replaces or depends on (``sources()``),
and pydantic-core's release (vLLM's chunks are its bytes); and a few probe chunks
(``probes()``), written both by the stream writer's ``"vllm"`` shapes and by vLLM's own
models dumped by pydantic, must be the same bytes (the models' members, their order, defaults
and serializers). Where anything differs, the generators stay vLLM's, the plugin keeps the
dump patch, and one WARNING line names what differs.
"""

from __future__ import annotations

import contextvars
import hashlib
import inspect
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Sequence
from typing import Any

from ..writer._writer import StreamShape, StreamWriter

__all__ = ["CHECKED", "CHECKED_VLLM", "TokenTable", "chat_covered", "completion_covered",
           "differences", "fingerprint", "install_generators", "probes", "sources", "table",
           "uninstall_generators", "vocabulary_size"]

log = logging.getLogger("tokcore.plugins.vllm")

#: the vLLM release the generator mode was written against and checked with
CHECKED_VLLM = "0.32.0"
#: what it was checked against (``fingerprint()`` there): the first 16 hex digits of the
#: sha256 of each of ``sources()``, by name, and pydantic-core's release
CHECKED: dict[str, str] = {
    "OpenAIServingChat.chat_completion_stream_generator": "413759ad163362db",
    "OpenAIServingChat._create_chat_logprobs": "cb7b7ad3766cc77c",
    "OpenAIServingChat._get_top_logprobs": "8e27ccc975d21e19",
    "OpenAIServingChat.get_chat_request_role": "fc52e1d75e2c13d2",
    "maybe_filter_parallel_tool_calls": "41ed6e6cc26e8e6a",
    "_make_prompt_tokens_details": "5536ed8fec57e469",
    "as_list": "a5ab68f8e5ac5f64",
    "OpenAIServingCompletion.completion_stream_generator": "3f590ecb8478e275",
    "OpenAIServingCompletion._create_completion_logprobs": "eb44cf0ebb9fc4ab",
    "GenerateBaseServing._get_decoded_token": "9479161a7a4b4306",
    "GenerateBaseServing._raise_if_error": "a89140fc600bb405",
    "format_token_id_placeholder": "a38f57719b0ed563",
    "build_spec_decoding_metrics": "5d851548cd2c681a",
    "should_include_usage": "f6bbdfdd461a2573",
    "LogprobsProcessor.from_new_request": "e8a0bed9a2f36092",
    "LogprobsProcessor._update_sample_logprobs": "acd9081bb7c5ced1",
    "LogprobsProcessor._verify_tokens": "82d902834e525450",
    "LogprobsProcessor._correct_decoded_token": "0cb5150c52815a6e",
    "LogprobsProcessor._get_sampled_context_ids": "36865c348ed2b86d",
    "LogprobsProcessor.update_from_output": "2d4d3c33fc3cc5d2",
    "create_sample_logprobs": "16d8d09571eda064",
    "convert_ids_list_to_tokens": "6d5bec549f3c1e1c",
    "get_leading_space_marker": "c606a0e2220ef241",
    "_restore_leading_spaces": "c006565ed84ba9a8",
    "append_logprobs_for_next_position": "6ed1dc5e4d3069a5",
    "Logprob": "6038ceca03702703",
    "FlatLogprobs": "6d4f1deae83e280b",
    "RequestState._new_completion_output": "dec8c8112ea29602",
    "RequestOutput.add": "2fb578d07eb37857",
    "pydantic-core": "2.50.5",
}

#: the requests being added to vLLM's output processor are one stream's of ours (their
#: logprobs processors take their texts from the table): set by ``_mark`` while the stream
#: awaits its result generator's first step, where vLLM adds them, and reset before anything
#: else runs in the task (``_unmark``)
_TABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("tokcore_vllm_tabled",
                                                               default=False)
#: what install_generators replaced: (owner, name, the original attribute)
_REPLACED: list[tuple[type, str, Any]] = []
_V: dict[str, Any] = {}  # vLLM's names this module calls, found when installed
#: the differences an install found (each set's line written once a process)
_REFUSED: list[str] = []
_SHAPES: dict[str, StreamShape] = {}
_DONE = b"data: [DONE]\n\n"


def _shape(api: str) -> StreamShape:
    shape = _SHAPES.get(api)
    if shape is None:
        shape = _SHAPES[api] = StreamShape(api, "vllm")  # type: ignore[arg-type]
    return shape


# --- which vLLM

def _vllm() -> dict[str, Any]:
    """vLLM's names this module reads or replaces (ImportError: not this layout)."""
    from vllm import logprobs as vllm_logprobs  # type: ignore[import-not-found]
    from vllm import outputs
    from vllm.entrypoints.generate.base import (  # type: ignore[import-not-found]
        protocol as base_protocol,
    )
    from vllm.entrypoints.generate.base import serving as base
    from vllm.entrypoints.openai.chat_completion import (  # type: ignore[import-not-found]
        protocol as chat_protocol,
    )
    from vllm.entrypoints.openai.chat_completion import (
        serving as chat_serving,
    )
    from vllm.entrypoints.openai.completion import (  # type: ignore[import-not-found]
        protocol as completion_protocol,
    )
    from vllm.entrypoints.openai.completion import (
        serving as completion_serving,
    )
    from vllm.entrypoints.serve.engine import (  # type: ignore[import-not-found]
        protocol as engine_protocol,
    )
    from vllm.entrypoints.serve.utils import api_utils  # type: ignore[import-not-found]
    from vllm.exceptions import GenerationError  # type: ignore[import-not-found]
    from vllm.tokenizers import detokenizer_utils  # type: ignore[import-not-found]
    from vllm.v1.engine import logprobs as engine_logprobs  # type: ignore[import-not-found]
    from vllm.v1.engine import output_processor

    return {"base": base, "base_protocol": base_protocol, "chat_serving": chat_serving,
            "chat_protocol": chat_protocol, "completion_serving": completion_serving,
            "completion_protocol": completion_protocol, "engine_protocol": engine_protocol,
            "api_utils": api_utils, "GenerationError": GenerationError,
            "detokenizer_utils": detokenizer_utils, "engine_logprobs": engine_logprobs,
            "vllm_logprobs": vllm_logprobs, "outputs": outputs,
            "output_processor": output_processor}


def sources(v: dict[str, Any] | None = None) -> dict[str, Any]:
    """The vLLM functions and classes whose behaviour the generator mode reproduces, replaces
    or depends on, by their qualified names: the two stream generators it replaces and the
    code they call or whose output it writes itself (the logprobs, the token ids' list, the
    usage, the roles, the errors, the tool-call filter that changes nothing without a tool
    parser); the logprobs processor's code it replaces or reproduces (``from_new_request``,
    ``_update_sample_logprobs``, the U+FFFD check and correction and their context), the
    functions a token table stands in for and the ``Logprob`` and ``FlatLogprobs`` it reads;
    and the code that carries a record from the processor to the generators unread
    (``update_from_output``, the completion output's slice, ``RequestOutput.add``)."""
    v = v or _vllm()
    chat_module, completion_module = v["chat_serving"], v["completion_serving"]
    chat = chat_module.OpenAIServingChat
    completion = completion_module.OpenAIServingCompletion
    processor = v["engine_logprobs"].LogprobsProcessor
    base = v["base"]
    detokenizer = v["detokenizer_utils"]
    logprobs = v["vllm_logprobs"]
    replaced = {(owner, name): original for owner, name, original in _REPLACED}
    new_request = replaced.get((processor, "from_new_request"),
                               processor.__dict__["from_new_request"])
    found = [
        replaced.get((chat, "chat_completion_stream_generator"),
                     chat.chat_completion_stream_generator),
        chat._create_chat_logprobs, chat._get_top_logprobs, chat.get_chat_request_role,
        chat_module.maybe_filter_parallel_tool_calls, chat_module._make_prompt_tokens_details,
        chat_module.as_list,
        replaced.get((completion, "completion_stream_generator"),
                     completion.completion_stream_generator),
        completion._create_completion_logprobs,
        base.GenerateBaseServing._get_decoded_token, base.GenerateBaseServing._raise_if_error,
        base.format_token_id_placeholder, base.build_spec_decoding_metrics,
        v["api_utils"].should_include_usage,
        new_request.__func__, processor._update_sample_logprobs, processor._verify_tokens,
        processor._correct_decoded_token, processor._get_sampled_context_ids,
        processor.update_from_output, v["engine_logprobs"].create_sample_logprobs,
        detokenizer.convert_ids_list_to_tokens, detokenizer.get_leading_space_marker,
        detokenizer._restore_leading_spaces,
        logprobs.append_logprobs_for_next_position, logprobs.Logprob, logprobs.FlatLogprobs,
        v["output_processor"].RequestState._new_completion_output,
        v["outputs"].RequestOutput.add,
    ]
    return {item.__qualname__: item for item in found}


def _digest(item: Any) -> str:
    try:
        source = inspect.getsource(item)
    except (OSError, TypeError):  # (no source to read: not one that was checked)
        return "no source"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def fingerprint(v: dict[str, Any] | None = None) -> dict[str, str]:
    """This vLLM's ``CHECKED``: the first 16 hex digits of the sha256 of each of
    ``sources()``'s source (``"no source"`` where it cannot be read), by name, and
    pydantic-core's release."""
    import pydantic_core

    found = {name: _digest(item) for name, item in sources(v).items()}
    found["pydantic-core"] = str(pydantic_core.__version__)
    return found


def differences(found: dict[str, str], expected: dict[str, str]) -> list[str]:
    """What differs between two fingerprints, named: a function whose source is another, or
    that one of them has not; a release, with both."""
    named = []
    for name in [*expected, *(name for name in found if name not in expected)]:
        if found.get(name) != expected.get(name):
            named.append(f"{name} {found.get(name)} (checked: {expected.get(name)})"
                         if name == "pydantic-core" else name)
    return named


def _dumped(cls: type, chunk: Any, **options: Any) -> bytes:
    """vLLM's frame of a chunk: pydantic's dump (not the dump patch's), as vLLM frames it."""
    from .vllm import _PATCHED

    dump = _PATCHED[cls][0] if cls in _PATCHED else \
        cls.model_dump_json  # type: ignore[attr-defined]
    return f"data: {dump(chunk, **options)}\n\n".encode()


#: the probe chunks' texts and logprobs: escapes, characters of each UTF-8 length, a line and
#: paragraph separator, a lone byte's U+FFFD; floats of every kind pydantic writes its way
_PROBE_TEXT = '"q" \\ \n\t\x00\x1f\x7f é ü 中文 🙂 \u2028\u2029 </script> \ufffd'
_PROBE_LOGPROBS = (-1e-07, -0.0, 0.0, -9999.0, -1.2345678901234567e-05, -3.0, float("nan"),
                   -123456.789)


def _probes_chat(v: dict[str, Any]) -> dict[str, tuple[Callable[[], bytes],
                                                        Callable[[], bytes]]]:
    m, engine = v["chat_serving"], v["engine_protocol"]
    rid, model, created, fp = "chatcmpl-probe", "m/é\"", 1700000000, "fp_probe"
    shape = _shape("chat")
    plain = StreamWriter(shape, id=rid, model=model, created=created, role="assistant")
    stamped = StreamWriter(shape, id=rid, model=model, created=created, role="assistant",
                           system_fingerprint=fp)
    cls = m.ChatCompletionStreamResponse
    tokens = [_PROBE_TEXT, "a", "\ufffd", "a"]
    values = _PROBE_LOGPROBS

    def chunk(choices: list[Any], usage: tuple[int, int] | None = None, **extra: Any) -> Any:
        made = cls(id=rid, object="chat.completion.chunk", created=created, choices=choices,
                   model=model, **extra)
        if usage is not None:
            made.usage = m.UsageInfo(prompt_tokens=usage[0], completion_tokens=usage[1],
                                     total_tokens=sum(usage), completion_tokens_details=None)
        return made

    def start(ids: list[int] | None, usage: tuple[int, int] | None) -> Any:
        return chunk([m.ChatCompletionResponseStreamChoice(
            index=1, delta=m.DeltaMessage(role="assistant", content=""), logprobs=None,
            finish_reason=None)], usage, prompt_token_ids=ids, prompt_text=None)

    def logprobs() -> Any:
        return m.ChatCompletionLogProbs(content=[m.ChatCompletionLogProbsContent(
            token=token, logprob=values[k], bytes=list(token.encode("utf-8", "replace")),
            top_logprobs=[m.ChatCompletionLogProb(
                token=top, logprob=value, bytes=list(top.encode("utf-8", "replace")))
                for top, value in zip(tokens, values[k:], strict=False)])
            for k, token in enumerate(tokens)])

    entries = [(token, values[k], token.encode("utf-8", "replace"),
                [(top, value, top.encode("utf-8", "replace"))
                 for top, value in zip(tokens, values[k:], strict=False)])
               for k, token in enumerate(tokens)]
    step = m.ChatCompletionResponseStreamChoice
    return {
        "the chat role chunk": (
            lambda: plain.write("start", index=1, usage=(3, 0), prompt_token_ids=[7, 2**31 - 1]),
            lambda: _dumped(cls, start([7, 2**31 - 1], (3, 0)), exclude_unset=True)),
        "the chat role chunk without ids": (
            lambda: plain.write("start", index=1),
            lambda: _dumped(cls, start(None, None), exclude_unset=True)),
        "a chat step": (
            lambda: plain.step(_PROBE_TEXT, 2),
            lambda: _dumped(cls, chunk([step(
                index=2, delta=m.DeltaMessage(content=_PROBE_TEXT), logprobs=None,
                finish_reason=None, token_ids=None)]), exclude_unset=True)),
        "a chat step with logprobs": (
            lambda: plain.step(_PROBE_TEXT, 0, token_ids=[5, 6, 7, 8], logprobs=entries,
                               usage=(3, 4)),
            lambda: _dumped(cls, chunk([step(
                index=0, delta=m.DeltaMessage(content=_PROBE_TEXT), logprobs=logprobs(),
                finish_reason=None, token_ids=[5, 6, 7, 8])], (3, 4)), exclude_unset=True)),
        "the chat finish chunk": (
            lambda: stamped.step("", 0, finish_reason="stop", stop_reason="\n"),
            lambda: _dumped(cls, chunk([step(
                index=0, delta=m.DeltaMessage(content=""), logprobs=None, finish_reason="stop",
                stop_reason="\n", token_ids=None)], system_fingerprint=fp),
                exclude_unset=True)),
        "the chat finish chunk with usage": (
            lambda: plain.step("!", 1, token_ids=[9], finish_reason="length", stop_reason=2,
                               usage=(3, 5)),
            lambda: _dumped(cls, chunk([step(
                index=1, delta=m.DeltaMessage(content="!"), logprobs=None,
                finish_reason="length", stop_reason=2, token_ids=[9])], (3, 5)),
                exclude_unset=True)),
        "the chat usage chunk": (
            lambda: stamped.usage(3, 5),
            lambda: _dumped(cls, _chat_usage(m, engine, cls, rid, model, created, fp),
                            exclude_unset=True, exclude_none=True)),
    }


def _chat_usage(m: Any, engine: Any, cls: type, rid: str, model: str, created: int,
                fp: str) -> Any:
    usage = m.UsageInfo(prompt_tokens=3, completion_tokens=5, total_tokens=8,
                        completion_tokens_details=None)
    usage.prompt_tokens_details = m._make_prompt_tokens_details(False, 2, None, None)
    return cls(id=rid, object="chat.completion.chunk", created=created, choices=[],
               model=model, usage=usage, system_fingerprint=fp, metrics=None)


def _probes_completion(v: dict[str, Any]) -> dict[str, tuple[Callable[[], bytes],
                                                              Callable[[], bytes]]]:
    m = v["completion_serving"]
    rid, model, created, fp = "cmpl-probe", "m/é\"", 1700000000, "fp_probe"
    shape = _shape("completions")
    plain = StreamWriter(shape, id=rid, model=model, created=created)
    stamped = StreamWriter(shape, id=rid, model=model, created=created, system_fingerprint=fp)
    cls = m.CompletionStreamResponse
    tokens = [_PROBE_TEXT, "a", "\ufffd", "\ufffd"]  # (a text twice: one key in vLLM's dict)
    values = _PROBE_LOGPROBS
    offsets = [4, 4 + len(tokens[0]), 5 + len(tokens[0]), 6 + len(tokens[0])]

    def chunk(choice: Any, usage: tuple[int, int] | None = None, **extra: Any) -> Any:
        made = cls(id=rid, object="text_completion", created=created, model=model,
                   choices=[choice], **extra)
        if usage is not None:
            made.usage = m.UsageInfo(prompt_tokens=usage[0], completion_tokens=usage[1],
                                     total_tokens=sum(usage))
        return made

    def logprobs() -> Any:
        return m.CompletionLogProbs(
            text_offset=offsets, token_logprobs=list(values[:len(tokens)]), tokens=tokens,
            top_logprobs=[{top: value for top, value in zip(tokens, values[k:], strict=False)}
                          for k in range(len(tokens))])

    entries = [(token, values[k], None, list(zip(tokens, values[k:], strict=False)),
                offsets[k]) for k, token in enumerate(tokens)]
    choice = m.CompletionResponseStreamChoice

    def final(cached: int | None, fingerprint: str | None) -> Any:
        usage = m.UsageInfo(prompt_tokens=5, completion_tokens=7, total_tokens=12)
        if cached is not None:
            usage.prompt_tokens_details = m.PromptTokenUsageInfo(cached_tokens=cached)
        return cls(id=rid, created=created, model=model, choices=[], usage=usage,
                   system_fingerprint=fingerprint, metrics=None)

    return {
        "a completions step with logprobs": (
            lambda: plain.step(_PROBE_TEXT, 3, token_ids=[5, 6, 7, 8], logprobs=entries,
                               usage=(5, 4), prompt_token_ids=[1, 2**31 - 1]),
            lambda: _dumped(cls, chunk(choice(
                index=3, text=_PROBE_TEXT, logprobs=logprobs(), finish_reason=None,
                stop_reason=None, prompt_token_ids=[1, 2**31 - 1], token_ids=[5, 6, 7, 8]),
                (5, 4)), exclude_unset=True)),
        "a completions step": (
            lambda: plain.step("x", 0),
            lambda: _dumped(cls, chunk(choice(
                index=0, text="x", logprobs=None, finish_reason=None, stop_reason=None,
                prompt_token_ids=None, token_ids=None)), exclude_unset=True)),
        "the completions finish chunk": (
            lambda: stamped.step("", 1, finish_reason="stop", stop_reason=2),
            lambda: _dumped(cls, chunk(choice(
                index=1, text="", logprobs=None, finish_reason="stop", stop_reason=2,
                prompt_token_ids=None, token_ids=None), system_fingerprint=fp),
                exclude_unset=True)),
        "the completions usage chunk": (
            lambda: stamped.usage(5, 7, 4),
            lambda: _dumped(cls, final(4, fp), exclude_unset=False, exclude_none=True)),
        "the completions usage chunk without details": (
            lambda: plain.usage(5, 7),
            lambda: _dumped(cls, final(None, None), exclude_unset=False, exclude_none=True)),
    }


def probes(v: dict[str, Any] | None = None) -> list[str]:
    """The probe chunks whose bytes by the stream writer's ``"vllm"`` shapes are not those of
    vLLM's own models, built as vLLM's generators build them (the classes their modules
    name) and dumped by pydantic as they dump them (a probe that raises is one of them)."""
    v = v or _vllm()
    differ = []
    for made in (_probes_chat, _probes_completion):
        try:
            found = made(v)
        except Exception:  # (vLLM's models are not what they were: none can be written)
            log.debug("tokcore's vLLM plugin: a probe could not be made", exc_info=True)
            differ.append(f"the {made.__name__[8:]} probes")
            continue
        for name, (ours, theirs) in found.items():
            try:
                same = ours() == theirs()
            except Exception:
                log.debug("tokcore's vLLM plugin: probe %r raised", name, exc_info=True)
                same = False
            if not same:
                differ.append(name)
    return differ


# --- the table of token texts

class TokenTable:
    """Each token id's text as vLLM's logprobs processor decodes it alone
    (``convert_ids_list_to_tokens(tokenizer, [id])``), made once per tokenizer and vocabulary
    (:func:`table`): an id's text is decoded the first time it is met, then looked up.
    ``partial`` holds the ids met whose text ends in U+FFFD (a piece of a character: vLLM
    corrects those from the context); an id is added there before its text is stored, so a
    reader on another thread that finds the text finds the id partial too."""

    __slots__ = ("_convert", "_texts", "_tokenizer", "corrected", "partial")

    #: at most this many corrected texts are kept (then the memo starts again)
    MAX_CORRECTED = 1 << 16

    def __init__(self, tokenizer: Any, convert: Callable[[Any, list[int]], list[str]]) -> None:
        self._tokenizer = tokenizer
        self._convert = convert
        self._texts: dict[int, str] = {}
        self.partial: set[int] = set()
        #: vLLM's correction of a partial token's text (``_correct_decoded_token``), by the
        #: id and the sampled ids before it (at most 4: all that function reads)
        self.corrected: dict[tuple[int, ...], str] = {}

    def __len__(self) -> int:
        return len(self._texts)

    def texts(self, ids: Sequence[int]) -> list[str]:
        """The ids' texts (a new list)."""
        texts = self._texts
        try:
            return [texts[i] for i in ids]
        except KeyError:
            missing = list(dict.fromkeys(i for i in ids if i not in texts))
            for i, text in zip(missing, self._convert(self._tokenizer, missing), strict=True):
                if text.endswith("\ufffd"):
                    self.partial.add(i)  # (first: the text is read before the mark)
                texts[i] = text
            return [texts[i] for i in ids]


#: the tables, by the tokenizer's id: (the tokenizer, its vocabulary's size, its table)
_TABLES: dict[int, tuple[Any, int, TokenTable]] = {}


def vocabulary_size(tokenizer: Any) -> int:
    """How many tokens the tokenizer has now, added tokens included: its backend's count (a
    Hugging Face fast tokenizer's, which vLLM's cached copy shares while it freezes its own
    ``len()``), else ``len(tokenizer)``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return int(backend.get_vocab_size(with_added_tokens=True))
    return len(tokenizer)


def table(tokenizer: Any) -> TokenTable:
    """The table of this tokenizer and its vocabulary as it is now: made the first time it is
    asked for, and again once the vocabulary has grown (``add_tokens``), so that no text is
    kept from before. A tabled processor asks once, at its first step."""
    size = vocabulary_size(tokenizer)
    found = _TABLES.get(id(tokenizer))
    if found is None or found[0] is not tokenizer or found[1] != size:
        if len(_TABLES) >= 16:
            _TABLES.clear()
        convert = _V["detokenizer_utils"].convert_ids_list_to_tokens if _V else None
        if convert is None:
            convert = _vllm()["detokenizer_utils"].convert_ids_list_to_tokens
        found = _TABLES[id(tokenizer)] = (tokenizer, size, TokenTable(tokenizer, convert))
    return found[2]


def _record_dict(record: tuple[Any, ...]) -> dict[int, Any]:
    """A position's record as vLLM's processor stores the position: its dict of ``Logprob``
    (``append_logprobs_for_next_position``, vLLM's own function)."""
    made: list[dict[int, Any]] = []
    _V["engine_logprobs"].append_logprobs_for_next_position(made, *record)
    return made[0]


def _vllms(positions: Sequence[Any]) -> list[Any]:
    """A step's positions as vLLM's models take them (records made vLLM's dicts)."""
    return [_record_dict(p) if type(p) is tuple else p for p in positions]


def _record_span(ids: list[int], num: int) -> tuple[int, int] | None:
    """Where a record's entries lie in its lists, as ``(start, size)``: the dict vLLM's
    ``append_logprobs_for_next_position`` makes holds ``ids[start:size]`` with their values
    in order, where its first ``size`` ids (``1 + num_logprobs`` at most) are distinct
    (start 0) or distinct but for the sampled id repeated as the top one (start 1: vLLM's
    sampler writes the sampled id first, then the top ids, and greedy sampling repeats it;
    the dict's first entry, in the first place, has the second's values). None for any
    other record (a repeat elsewhere: the dict decides)."""
    size = len(ids) if num == -1 or len(ids) <= num + 1 else num + 1
    unique = len(set(ids[:size] if size < len(ids) else ids))
    if unique == size:
        return 0, size
    if unique == size - 1 and ids[0] == ids[1]:
        return 1, size
    return None


def _position(position: Any) -> list[tuple[int, float, Any]]:
    """A position's entries as vLLM's dict holds them, in its order: ``(id, logprob,
    decoded text)``. From a record: the dict vLLM's ``append_logprobs_for_next_position``
    would make, without its objects (its ``zip`` cut to the first ``1 + num_logprobs``
    entries; a repeated id keeps its first place and its last values)."""
    if type(position) is not tuple:
        return [(i, entry.logprob, entry.decoded_token) for i, entry in position.items()]
    ids, logprobs, decoded, _, num = position
    span = _record_span(ids, num)
    if span is not None:
        start, size = span
        return list(zip(ids[start:size], logprobs[start:], decoded[start:]))
    if num != -1 and len(ids) > num + 1:
        ids = ids[:num + 1]
    return [(i, lp, text) for i, (lp, text) in dict(zip(ids, zip(logprobs, decoded))).items()]


def _tabled_class(processor: Any) -> type:
    """vLLM's LogprobsProcessor with the sample logprobs' texts from the table (its
    ``_update_sample_logprobs`` as vLLM 0.32 writes it, the decode replaced). Each position
    of a list of sample logprobs is kept as a record, ``(ids, logprobs, decoded texts,
    rank, num_logprobs)``: the arguments of vLLM's ``append_logprobs_for_next_position``,
    which builds a dict of ``Logprob`` objects from them that only this module's generators
    read (``_position`` reads a record as that dict; ``_record_dict`` makes the dict for
    vLLM's models). ``FlatLogprobs`` are appended to by vLLM's function."""
    logprobs_module = _V["engine_logprobs"]
    append = logprobs_module.append_logprobs_for_next_position
    correct = processor._correct_decoded_token

    class TabledLogprobsProcessor(processor):  # type: ignore[misc]
        #: the table of the request's tokenizer, found at its first step (``_table``)
        token_table: TokenTable | None = None

        def _table(self) -> TokenTable:
            found = self.token_table
            if found is None:
                found = self.token_table = table(self.tokenizer)
            return found

        def _correct_decoded_token(self, token_id: int, context_token_ids: list[int]) -> str:
            # vLLM's own correction (a function of the tokenizer, the id and the last 4
            # context ids: up to 4 + 4 + 1 decodes through the tokenizer pool), memoised
            memo = self._table().corrected
            key = (token_id, *context_token_ids[-4:])
            text: str | None = memo.get(key)
            if text is None:
                text = correct(self, token_id, context_token_ids)
                if len(memo) >= TokenTable.MAX_CORRECTED:
                    memo.clear()
                memo[key] = text
            return text

        def _update_sample_logprobs(self, logprobs_lists: Any) -> None:
            token_ids_lst, logprobs_lst, ranks_lst, _ = logprobs_lists
            found = self.token_table
            if found is None:
                found = self._table()
            texts, partial = found.texts, found.partial
            kept = self.logprobs
            records = type(kept) is list
            if getattr(ranks_lst, "ndim", 0) == 1 and getattr(logprobs_lst, "ndim", 0) == \
                    getattr(token_ids_lst, "ndim", 0) == 2:
                # numpy's arrays (as vLLM's engine sends them): their rows' lists from one
                # tolist() each, not three a row (a row's tolist() is its list)
                rows: Any = zip(ranks_lst.tolist(), logprobs_lst.tolist(),
                                token_ids_lst.tolist(), strict=False)
            else:
                rows = ((r.tolist(), lp.tolist(), i.tolist()) for r, lp, i in
                        zip(ranks_lst, logprobs_lst, token_ids_lst, strict=False))
            for rank, logprobs, token_ids in rows:
                decoded = texts(token_ids)
                if not partial.isdisjoint(token_ids):  # (else vLLM's check changes nothing)
                    # the sampled ids of the last 4 positions (each's first key in vLLM)
                    context = [p[0][0] if type(p) is tuple else next(iter(p))
                               for p in kept[-4:] if p is not None] if records else \
                        self._get_sampled_context_ids(kept)
                    decoded = self._verify_tokens(
                        decoded_tokens_list=decoded, tokens=token_ids,
                        context_token_ids=context)
                self.cumulative_logprob += logprobs[0]
                if records and token_ids:
                    kept.append((token_ids, logprobs, decoded, rank, self.num_logprobs))
                else:
                    append(kept, token_ids, logprobs, decoded, rank, self.num_logprobs)

    return TabledLogprobsProcessor


# --- which requests

def _last_message(request: Any, conversation: Any, role: str) -> Any:
    """What vLLM's chat generator echoes (its own expression)."""
    if conversation and "content" in conversation[-1] and conversation[-1].get("role") == role:
        return conversation[-1]["content"] or ""
    return ""


def chat_covered(serving: Any, request: Any, request_id: Any, model_name: Any,
                 conversation: Any, tokenizer: Any) -> bool:
    """Whether this module writes this chat request's stream (the module's docstring)."""
    if type(serving) is not _V["chat_serving"].OpenAIServingChat or \
            serving.parser_cls is not None or serving._include_reasoning_tokens_details or \
            (serving.enable_log_outputs and serving.request_logger) or \
            request.return_prompt_text or type(request_id) is not str or \
            type(model_name) is not str:
        return False
    role = serving.get_chat_request_role(request)
    if type(role) is not str or (request.echo and _last_message(request, conversation, role)):
        return False
    include_usage, _ = _V["api_utils"].should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    if include_usage and (serving.enable_prompt_tokens_details or
                          serving.enable_per_request_metrics):
        return False
    return not (request.logprobs and tokenizer is None)


def completion_covered(serving: Any, request: Any, request_id: Any, model_name: Any,
                       created: Any, tokenizer: Any) -> bool:
    """Whether this module writes this completion request's stream (the module's
    docstring)."""
    if type(serving) is not _V["completion_serving"].OpenAIServingCompletion or \
            (request.echo and request.logprobs is not None) or type(request_id) is not str or \
            type(model_name) is not str or type(created) is not int:
        return False
    include_usage, _ = _V["api_utils"].should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    if include_usage and serving.enable_per_request_metrics:
        return False
    return not (request.logprobs is not None and tokenizer is None)


# --- the logprobs of a step

class _Odd(Exception):
    """A step the writer has no frame for: vLLM's models write it."""


def _sampled(items: list[tuple[int, float, Any]], token_id: int
             ) -> tuple[int, float, Any] | None:
    """The sampled token's entry among a position's (vLLM's ``position[token_id]``)."""
    for item in items:
        if item[0] == token_id:
            return item
    return None


def _chat_logprobs(token_ids: Sequence[int], positions: Sequence[Any], top: int | None,
                   every: bool, as_ids: bool) -> list[tuple[Any, ...]]:
    """A step's chat logprobs as the writer's entries (vLLM's ``_create_chat_logprobs``)."""
    entries: list[tuple[Any, ...]] = []
    for k, token_id in enumerate(token_ids):
        position = positions[k]
        if position is None:
            raise _Odd
        items = _position(position)
        sampled = _sampled(items, token_id)
        if sampled is None or sampled[2] is None:
            raise _Odd
        _, logprob, decoded = sampled
        tops = []
        for j, (top_id, top_logprob, text) in enumerate(items):
            if not (every or top == -1 or (top is not None and j < top)):
                break
            if as_ids:
                text = f"token_id:{top_id}"
            elif text is None:
                raise _Odd
            tops.append((text, max(top_logprob, -9999.0),
                         text.encode("utf-8", errors="replace")))
        entries.append((f"token_id:{token_id}" if as_ids else decoded,
                        max(logprob, -9999.0),
                        decoded.encode("utf-8", errors="replace"), tops))
    return entries


def _record_tops(record: tuple[Any, ...], token_id: int, top: int, every: bool
                 ) -> tuple[float, str, list[tuple[str, float]]] | None:
    """A record's sampled logprob, sampled text and top entries for a completion, as
    ``_completion_logprobs`` makes them through ``_position``, straight from the record's
    lists where ``_record_span`` finds its entries there and the first is the sampled
    token's; None for any other record."""
    ids, logprobs, texts, _, num = record
    span = _record_span(ids, num)
    if span is None:
        return None
    start, size = span
    if start == size or ids[start] != token_id:
        return None
    end = size if every or top == -1 or size - start <= top + 1 else start + top + 1
    lps = logprobs[start:end]
    # none below -9999.0: the writer's entries are the record's own (min is nan only where
    # the first is nan: then each clamped as vLLM's max(lp, -9999.0), nan kept)
    if min(lps) >= -9999.0:
        tops = list(zip(texts[start:end], lps))
    else:
        tops = [(text, -9999.0 if lp < -9999.0 else lp)
                for text, lp in zip(texts[start:end], lps)]
    return logprobs[start], texts[start], tops


def _completion_logprobs(token_ids: Sequence[int], positions: Sequence[Any], top: int,
                         every: bool, as_ids: bool, offset: int
                         ) -> tuple[list[tuple[Any, ...]], int | None]:
    """A step's completion logprobs as the writer's entries and the next text offset (None:
    no token), as vLLM's ``_create_completion_logprobs`` makes them."""
    entries: list[tuple[Any, ...]] = []
    length = 0
    for k, token_id in enumerate(token_ids):
        position = positions[k]
        if position is None:
            raise _Odd
        found = _record_tops(position, token_id, top, every) \
            if type(position) is tuple and not as_ids else None
        if found is not None:
            logprob, token, tops = found
            if k:
                offset += length
            length = len(token)
            entries.append((token, -9999.0 if logprob < -9999.0 else logprob, None, tops,
                            offset))
            continue
        items = _position(position)
        sampled = _sampled(items, token_id)
        if sampled is None:
            raise KeyError(token_id)  # (vLLM's step_top_logprobs[token_id])
        if not (every or top == -1) and len(items) > top + 1:
            items = items[:top + 1]
        # (-9999.0 if lp < -9999.0 else lp: vLLM's max(lp, -9999.0), nan kept, no call)
        if as_ids:
            token = f"token_id:{token_id}"
            tops = [(f"token_id:{top_id}", -9999.0 if lp < -9999.0 else lp)
                    for top_id, lp, _ in items]
        else:
            token = sampled[2]
            tops = [(text, -9999.0 if lp < -9999.0 else lp) for _, lp, text in items]
            if token is None or (type(position) is not tuple and
                                 any(text is None for text, _ in tops)):
                raise _Odd  # (a record's texts are the table's: never None)
        if k:
            offset += length
        length = len(token)
        entries.append((token, -9999.0 if sampled[1] < -9999.0 else sampled[1], None, tops,
                        offset))
    return entries, (offset + length if entries else None)


def _mark() -> contextvars.Token[bool]:
    """Mark the engine requests added from here on in this task as ours (their logprob
    texts from the table), until ``_unmark``. A generator marks before it awaits its result
    generator's first step and unmarks as soon as that step is over, however it ends, and
    before it yields anything: vLLM's ``AsyncLLM.generate`` adds its requests at its first
    step (and ``merge_async_iterators``'s tasks, made then, copy the mark for the prompts'
    requests), so the mark covers those requests and nothing else the task runs."""
    return _TABLED.set(True)


def _unmark(mark: contextvars.Token[bool] | None) -> contextvars.Token[bool] | None:
    """The mark ``_mark`` set, reset (None: reset already); None, for the caller to keep
    (``mark = _unmark(mark)``)."""
    if mark is not None:
        _TABLED.reset(mark)
    return None


# --- the generators

async def _chat(serving: Any, request: Any, result_generator: AsyncIterator[Any],
                request_id: str, model_name: str, tokenizer: Any, request_metadata: Any
                ) -> AsyncGenerator[bytes, None]:
    """vLLM 0.32's ``chat_completion_stream_generator`` for a covered request."""
    created = int(time.time())
    n = 1 if request.n is None else request.n
    previous_num_tokens = [0] * n
    finish_sent = [False] * n
    num_prompt_tokens = 0
    include_usage, continuous = _V["api_utils"].should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    role = serving.get_chat_request_role(request)
    fingerprint = serving.system_fingerprint
    shape = _shape("chat")
    plain = StreamWriter(shape, id=request_id, model=model_name, created=created, role=role)
    stamped = plain if fingerprint is None else StreamWriter(
        shape, id=request_id, model=model_name, created=created, role=role,
        system_fingerprint=fingerprint)
    last = plain if include_usage else stamped
    want_logprobs = bool(request.logprobs)
    top = request.top_logprobs
    every = bool(request.logprob_token_ids)
    as_ids = request.return_tokens_as_token_ids
    if as_ids is None:
        as_ids = serving.return_tokens_as_token_ids
    return_ids = request.return_token_ids
    generation_error = _V["GenerationError"]
    last_res = None
    out: list[bytes] = []  # (the step's chunks not yet written)
    # (until the first step: the requests result_generator adds are ours)
    mark: contextvars.Token[bool] | None = _mark()
    try:
        first = True
        async for res in result_generator:
            last_res = res
            if res.prompt_token_ids is not None:
                num_prompt_tokens = len(res.prompt_token_ids)
                if res.encoder_prompt_token_ids is not None:
                    num_prompt_tokens += len(res.encoder_prompt_token_ids)
            if first:
                mark = _unmark(mark)
                prompt_ids = res.prompt_token_ids if return_ids else None
                usage = (num_prompt_tokens, 0) if continuous else None
                yield b"".join([plain.write("start", index=i, usage=usage,
                                            prompt_token_ids=prompt_ids) for i in range(n)])
                first = False
            for output in res.outputs:
                i = output.index
                if finish_sent[i]:
                    continue
                finish = output.finish_reason
                if finish is not None:  # (vLLM's check raises for "error" alone)
                    serving._raise_if_error(finish, request_id)
                token_ids = output.token_ids
                logprobs = None
                odd = False
                if want_logprobs:
                    assert output.logprobs is not None, "Did not output logprobs"
                    try:
                        logprobs = _chat_logprobs(token_ids, output.logprobs, top, every,
                                                  as_ids)
                    except _Odd:
                        odd = True
                text = output.text
                if not text and not token_ids and not previous_num_tokens[i]:
                    continue
                previous_num_tokens[i] += len(token_ids)
                ids = (token_ids if type(token_ids) is list else list(token_ids)) \
                    if return_ids else None
                usage = (num_prompt_tokens, previous_num_tokens[i]) if continuous else None
                if finish is not None:
                    finish = finish or "stop"
                    finish_sent[i] = True
                if odd:
                    out.append(_chat_fallback(serving, request, tokenizer, output, ids, usage,
                                              finish, include_usage, request_id, model_name,
                                              created))
                elif finish is None:
                    out.append(plain.step(text, i, token_ids=ids, logprobs=logprobs,
                                          usage=usage))
                else:
                    out.append(last.step(text, i, token_ids=ids, logprobs=logprobs,
                                         finish_reason=finish, stop_reason=output.stop_reason,
                                         usage=usage))
            if out:  # (a step's chunks in one write: one send through the app, not one each)
                step = out[0] if len(out) == 1 else b"".join(out)
                out = []
                yield step
        mark = _unmark(mark)  # (no step came)
        completion_tokens = sum(previous_num_tokens)
        if include_usage:
            metrics = _V["base"].build_spec_decoding_metrics(last_res) if n == 1 else None
            if metrics is None:
                yield stamped.usage(num_prompt_tokens, completion_tokens)
            else:
                yield _final_fallback(_V["chat_protocol"].ChatCompletionStreamResponse,
                                      serving, request_id, model_name, created,
                                      num_prompt_tokens, completion_tokens, None, metrics)
        request_metadata.final_usage_info = _V["engine_protocol"].UsageInfo(
            prompt_tokens=num_prompt_tokens, completion_tokens=completion_tokens,
            total_tokens=num_prompt_tokens + completion_tokens, completion_tokens_details=None)
    except generation_error as e:
        mark = _unmark(mark)
        if out:  # (vLLM's generator wrote the step's chunks before the one that raised)
            yield b"".join(out)
        yield f"data: {serving._convert_generation_error_to_streaming_response(e)}\n\n".encode()
    except Exception as e:
        mark = _unmark(mark)
        log.exception("Error in chat completion stream generator.")
        if out:
            yield b"".join(out)
        yield f"data: {serving.create_streaming_error_response(e)}\n\n".encode()
    except BaseException:  # (a cancellation while the first step is awaited)
        _unmark(mark)
        raise
    yield _DONE


async def _completion(serving: Any, request: Any, engine_inputs: Any,
                      result_generator: AsyncIterator[Any], request_id: str, created: int,
                      model_name: str, num_prompts: int, tokenizer: Any,
                      request_metadata: Any) -> AsyncGenerator[bytes, None]:
    """vLLM 0.32's ``completion_stream_generator`` for a covered request."""
    n = 1 if request.n is None else request.n
    next_offsets = [0] * n * num_prompts
    previous_num_tokens = [0] * n * num_prompts
    echoed = [False] * n * num_prompts
    num_prompt_tokens = [0] * num_prompts
    num_cached_tokens = None
    include_usage, continuous = _V["api_utils"].should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    fingerprint = serving.system_fingerprint
    shape = _shape("completions")
    plain = StreamWriter(shape, id=request_id, model=model_name, created=created)
    stamped = plain if fingerprint is None else StreamWriter(
        shape, id=request_id, model=model_name, created=created,
        system_fingerprint=fingerprint)
    last = plain if include_usage else stamped
    top = request.logprobs
    every = bool(request.logprob_token_ids)
    as_ids = request.return_tokens_as_token_ids
    if as_ids is None:
        as_ids = serving.return_tokens_as_token_ids
    return_ids = request.return_token_ids
    echo = request.echo
    generation_error = _V["GenerationError"]
    last_res = None
    out: list[bytes] = []  # (the step's chunks not yet written)
    # (until the first step: the requests result_generator adds are ours)
    mark: contextvars.Token[bool] | None = _mark()
    try:
        first = True
        async for prompt_idx, res in result_generator:
            last_res = res
            prompt_token_ids = res.prompt_token_ids
            if first:
                mark = _unmark(mark)
                num_cached_tokens = res.num_cached_tokens
                first = False
            prompt_text = res.prompt
            if prompt_text is None:
                prompt_text = serving._extract_prompt_text(engine_inputs[prompt_idx])
            if prompt_token_ids is not None:
                num_prompt_tokens[prompt_idx] = len(prompt_token_ids)
            for output in res.outputs:
                i = output.index + prompt_idx * n
                finish = output.finish_reason
                if finish is not None:  # (vLLM's check raises for "error" alone)
                    serving._raise_if_error(finish, request_id)
                prompt_ids = None
                assert request.max_tokens is not None
                if echo and not echoed[i]:
                    assert prompt_token_ids is not None
                    if return_ids:
                        prompt_text = ""
                    assert prompt_text is not None
                    text = prompt_text if request.max_tokens == 0 else \
                        prompt_text + output.text
                    prompt_ids = prompt_token_ids
                    echoed[i] = True
                    delta_ids: Any = None
                else:
                    text = output.text
                    delta_ids = output.token_ids
                    if not echoed[i] and return_ids:
                        prompt_ids = prompt_token_ids
                        echoed[i] = True
                    if not text and not delta_ids and not previous_num_tokens[i]:
                        continue
                logprobs = None
                odd = False
                if top is not None:  # (never with echo: not covered)
                    assert output.logprobs is not None, "Did not output logprobs"
                    try:
                        logprobs, offset = _completion_logprobs(
                            delta_ids, output.logprobs, top, every, as_ids, next_offsets[i])
                        if offset is not None:
                            next_offsets[i] = offset
                    except _Odd:
                        odd = True
                previous_num_tokens[i] += len(output.token_ids)
                ids = None
                if return_ids:
                    ids = output.token_ids if type(output.token_ids) is list else \
                        list(output.token_ids)
                usage = (num_prompt_tokens[prompt_idx], previous_num_tokens[i]) \
                    if continuous else None
                if odd:
                    out.append(_completion_fallback(
                        serving, request, tokenizer, output, delta_ids, i, text, ids,
                        prompt_ids, usage, include_usage, next_offsets, request_id,
                        model_name, created))
                else:
                    out.append((plain if finish is None else last).step(
                        text, i, token_ids=ids, logprobs=logprobs, finish_reason=finish,
                        stop_reason=output.stop_reason, usage=usage,
                        prompt_token_ids=prompt_ids))
            if out:  # (a step's chunks in one write: one send through the app, not one each)
                step = out[0] if len(out) == 1 else b"".join(out)
                out = []
                yield step
        mark = _unmark(mark)  # (no step came)
        total_prompt = sum(num_prompt_tokens)
        total_completion = sum(previous_num_tokens)
        details = serving.enable_prompt_tokens_details and num_cached_tokens is not None
        if include_usage:
            metrics = _V["base"].build_spec_decoding_metrics(last_res) \
                if num_prompts == 1 and n == 1 else None
            if metrics is None:
                yield stamped.usage(total_prompt, total_completion,
                                    num_cached_tokens if details else None)
            else:
                yield _final_fallback(_V["completion_protocol"].CompletionStreamResponse,
                                      serving, request_id, model_name, created, total_prompt,
                                      total_completion, num_cached_tokens if details else None,
                                      metrics)
        usage_info = _V["engine_protocol"].UsageInfo(
            prompt_tokens=total_prompt, completion_tokens=total_completion,
            total_tokens=total_prompt + total_completion)
        if details:
            usage_info.prompt_tokens_details = _V["engine_protocol"].PromptTokenUsageInfo(
                cached_tokens=num_cached_tokens)
        request_metadata.final_usage_info = usage_info
    except generation_error as e:
        mark = _unmark(mark)
        if out:  # (vLLM's generator wrote the step's chunks before the one that raised)
            yield b"".join(out)
        yield f"data: {serving._convert_generation_error_to_streaming_response(e)}\n\n".encode()
    except Exception as e:
        mark = _unmark(mark)
        log.exception("Error in completion stream generator.")
        if out:
            yield b"".join(out)
        yield f"data: {serving.create_streaming_error_response(e)}\n\n".encode()
    except BaseException:  # (a cancellation while the first step is awaited)
        _unmark(mark)
        raise
    yield _DONE


# --- the steps written by vLLM's models (not seen from vLLM's engine; kept exact)

def _chat_fallback(serving: Any, request: Any, tokenizer: Any, output: Any,
                   ids: list[int] | None, usage: tuple[int, int] | None, finish: str | None,
                   include_usage: bool, request_id: str, model_name: str,
                   created: int) -> bytes:
    protocol = _V["chat_protocol"]
    logprobs = serving._create_chat_logprobs(
        token_ids=output.token_ids, top_logprobs=_vllms(output.logprobs), tokenizer=tokenizer,
        num_output_top_logprobs=request.top_logprobs,
        logprob_token_ids=request.logprob_token_ids,
        return_as_token_id=request.return_tokens_as_token_ids)
    delta = _V["base_protocol"].DeltaMessage(content=output.text)
    if finish is None:
        choice = protocol.ChatCompletionResponseStreamChoice(
            index=output.index, delta=delta, logprobs=logprobs, finish_reason=None,
            token_ids=ids)
    else:
        choice = protocol.ChatCompletionResponseStreamChoice(
            index=output.index, delta=delta, logprobs=logprobs, finish_reason=finish,
            stop_reason=output.stop_reason, token_ids=ids)
    chunk = protocol.ChatCompletionStreamResponse(
        id=request_id, object="chat.completion.chunk", created=created, choices=[choice],
        model=model_name)
    if not include_usage and serving.system_fingerprint is not None and finish is not None:
        chunk.system_fingerprint = serving.system_fingerprint
    if usage is not None:
        chunk.usage = _V["engine_protocol"].UsageInfo(
            prompt_tokens=usage[0], completion_tokens=usage[1],
            total_tokens=usage[0] + usage[1], completion_tokens_details=None)
    return f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n".encode()


def _completion_fallback(serving: Any, request: Any, tokenizer: Any, output: Any,
                         delta_ids: Any, i: int, text: str, ids: list[int] | None,
                         prompt_ids: Any, usage: tuple[int, int] | None, include_usage: bool,
                         next_offsets: list[int], request_id: str, model_name: str,
                         created: int) -> bytes:
    protocol = _V["completion_protocol"]
    logprobs = serving._create_completion_logprobs(
        token_ids=delta_ids, top_logprobs=_vllms(output.logprobs),
        num_output_top_logprobs=request.logprobs, tokenizer=tokenizer,
        logprob_token_ids=request.logprob_token_ids, initial_text_offset=next_offsets[i],
        return_as_token_id=request.return_tokens_as_token_ids)
    if logprobs.tokens:
        next_offsets[i] = logprobs.text_offset[-1] + len(logprobs.tokens[-1])
    chunk = protocol.CompletionStreamResponse(
        id=request_id, object="text_completion", created=created, model=model_name,
        choices=[protocol.CompletionResponseStreamChoice(
            index=i, text=text, logprobs=logprobs, finish_reason=output.finish_reason,
            stop_reason=output.stop_reason, prompt_token_ids=prompt_ids, token_ids=ids)])
    if not include_usage and serving.system_fingerprint is not None and \
            output.finish_reason is not None:
        chunk.system_fingerprint = serving.system_fingerprint
    if usage is not None:
        chunk.usage = _V["engine_protocol"].UsageInfo(
            prompt_tokens=usage[0], completion_tokens=usage[1],
            total_tokens=usage[0] + usage[1])
    return f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n".encode()


def _final_fallback(cls: Any, serving: Any, request_id: str, model_name: str, created: int,
                    prompt: int, completion: int, cached: int | None, metrics: Any) -> bytes:
    """The final usage chunk with speculative decoding metrics, by vLLM's models."""
    engine = _V["engine_protocol"]
    usage = engine.UsageInfo(prompt_tokens=prompt, completion_tokens=completion,
                             total_tokens=prompt + completion)
    if cached is not None:
        usage.prompt_tokens_details = engine.PromptTokenUsageInfo(cached_tokens=cached)
    per_request = _V["base_protocol"].PerRequestMetrics()
    per_request.speculative_decoding = metrics
    chunk = cls(id=request_id, created=created, model=model_name, choices=[], usage=usage,
                system_fingerprint=serving.system_fingerprint, metrics=per_request)
    options = {"exclude_unset": False} if cls is _V["completion_protocol"].\
        CompletionStreamResponse else {"exclude_unset": True}
    return f"data: {chunk.model_dump_json(exclude_none=True, **options)}\n\n".encode()


# --- install

def install_generators(expected: dict[str, str] | None = None) -> bool:
    """Replace vLLM's two stream generators (and its logprobs processor's decode, for the
    requests they write) when this vLLM's ``fingerprint()`` is ``expected`` (default:
    ``CHECKED``) and the ``probes()`` write the same bytes both ways; False, and one WARNING
    line naming what differs, when not (or when vLLM has not these names): the line is
    written once a process. Again: nothing happens."""
    if _REPLACED:
        return True
    try:
        v = _vllm()
        found = fingerprint(v)
    except (ImportError, AttributeError, OSError, TypeError) as error:
        log.warning("tokcore's vLLM plugin: no stream generators to replace here (%s): the "
                    "dump patch only", error)
        return False
    differ = differences(found, CHECKED if expected is None else expected) + probes(v)
    if differ:
        named = ", ".join(differ)
        if named in _REFUSED:
            return False
        _REFUSED.append(named)
        log.warning("tokcore's vLLM plugin: the generator mode was checked against vLLM %s, "
                    "and this differs here: %s: the dump patch only", CHECKED_VLLM, named)
        return False
    _V.update(v)
    chat = v["chat_serving"].OpenAIServingChat
    completion = v["completion_serving"].OpenAIServingCompletion
    processor = v["engine_logprobs"].LogprobsProcessor
    chat_original = chat.chat_completion_stream_generator
    completion_original = completion.completion_stream_generator
    new_request = processor.__dict__["from_new_request"]
    tabled = _tabled_class(processor)

    def chat_completion_stream_generator(
            self: Any, request: Any, result_generator: Any, request_id: Any, model_name: Any,
            conversation: Any, tokenizer: Any, request_metadata: Any,
            chat_template_kwargs: Any = None, mm_token_counts: Any = None) -> Any:
        if chat_covered(self, request, request_id, model_name, conversation, tokenizer):
            return _chat(self, request, result_generator, request_id, model_name, tokenizer,
                         request_metadata)
        return chat_original(self, request, result_generator, request_id, model_name,
                             conversation, tokenizer, request_metadata,
                             chat_template_kwargs=chat_template_kwargs,
                             mm_token_counts=mm_token_counts)

    def completion_stream_generator(
            self: Any, request: Any, engine_inputs: Any, result_generator: Any,
            request_id: Any, created_time: Any, model_name: Any, num_prompts: Any,
            tokenizer: Any, request_metadata: Any) -> Any:
        if completion_covered(self, request, request_id, model_name, created_time,
                              tokenizer):
            return _completion(self, request, engine_inputs, result_generator, request_id,
                               created_time, model_name, num_prompts, tokenizer,
                               request_metadata)
        return completion_original(self, request, engine_inputs, result_generator,
                                   request_id, created_time, model_name,
                                   num_prompts=num_prompts, tokenizer=tokenizer,
                                   request_metadata=request_metadata)

    def from_new_request(cls: Any, tokenizer: Any, request: Any) -> Any:
        made = new_request.__func__(cls, tokenizer, request)
        if _TABLED.get() and tokenizer is not None and made.num_logprobs is not None and \
                type(made) is processor:
            made.__class__ = tabled
        return made

    _REPLACED.extend([(chat, "chat_completion_stream_generator", chat_original),
                      (completion, "completion_stream_generator", completion_original),
                      (processor, "from_new_request", new_request)])
    chat.chat_completion_stream_generator = chat_completion_stream_generator
    completion.completion_stream_generator = completion_stream_generator
    processor.from_new_request = classmethod(from_new_request)
    return True


def uninstall_generators() -> None:
    """Give vLLM its own generators and logprobs processor back."""
    while _REPLACED:
        owner, name, original = _REPLACED.pop()
        setattr(owner, name, original)
