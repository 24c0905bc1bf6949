"""The stream writer's shapes of a vLLM release, built from that release's own chunk models,
and the probe chunks that check them.

Each frame's probe is the chunk the release's generator builds for it (the members it sets,
``kv_transfer_params`` and ``weight_versions`` where its ``Rules`` say), made with the
writer's sentinel values (``PROBE``) with the release's own models and dumped by pydantic
as the release dumps it: so the frames are that release's bytes, member for member, whatever
its models' order and defaults. :func:`probes` then writes a few chunks with real values both
ways (the writer with these shapes; the release's models dumped by pydantic) and names the
ones that differ: what a pydantic-core whose strings or floats come out otherwise would
break.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any, NamedTuple

from ..writer._writer import StreamShape, StreamWriter, Usage
from ..writer._writer_rules import PROBE as P
from ._vllm_names import Names
from ._vllm_releases import Release, Rules

__all__ = ["TOOL_FORMS", "Context", "ToolForm", "build", "probes"]

log = logging.getLogger("tokcore.plugins.vllm")

#: the members left out when None (``exclude_unset``: a member vLLM's code does not set)
_CHAT_OMIT = ("usage", "system_fingerprint", "usage.cached_tokens", "usage.reasoning_tokens",
              "finish.text")
_COMPLETION_OMIT = ("usage", "system_fingerprint", "usage.cached_tokens",
                    "usage.reasoning_tokens")


#: a tool parser's delta, by how vLLM's code made it: (``content`` set to None beside the
#: calls, as hermes's parser sets it; a later piece's ``name`` set to None, as tool_choice
#: required's does)
ToolForm = tuple[bool, bool]
#: the tool-call forms the plugin has shapes for: hermes's (content null); llama3_json's and
#: a named tool_choice's (neither); tool_choice required's (the name null on later pieces)
TOOL_FORMS: tuple[ToolForm, ...] = ((True, False), (False, False), (False, True))


class Context(NamedTuple):
    """What the plugin runs with on a known release."""

    names: Names
    release: Release
    chat: StreamShape
    completion: StreamShape
    #: a chat shape per tool-call form (its tool_start, tool_args and finish_tool_args
    #: frames; the chat shape's text and finish frames)
    tools: dict[ToolForm, StreamShape]
    #: a chat shape whose finish frame is a step's chunk with an empty delta and no finish
    #: (``"delta":{}``, ``"finish_reason":null``: a parser's step with nothing to write but
    #: the step's logprobs or token ids); write("finish", None, finish_reason=None)
    empty: StreamShape


def _frame(chunk: Any, **options: Any) -> str:
    return f"data: {chunk.model_dump_json(**options)}\n\n"


def _extra(rules: Rules) -> tuple[dict[str, Any], dict[str, Any]]:
    """The members a release's generator passes beyond 0.32's: on a chunk, on a choice."""
    chunk = {"kv_transfer_params": None} if rules.kv_transfer_params else {}
    choice = {"weight_versions": None} if rules.weight_versions else {}
    return chunk, choice


def _usage(n: Names, final: bool = False) -> Any:
    """The usage the probes carry (``final``: the final chunk's, with the prompt's details)."""
    made = n.UsageInfo(prompt_tokens=P.prompt_tokens, completion_tokens=P.completion_tokens,
                       total_tokens=P.total_tokens,
                       completion_tokens_details=n.CompletionTokenUsageInfo(
                           reasoning_tokens=P.reasoning_tokens))
    if final:
        made.prompt_tokens_details = n.PromptTokenUsageInfo(cached_tokens=P.cached_tokens)
    return made


def _logprobs(n: Names) -> Any:
    """A step's logprobs: one token and one top token."""
    return n.ChatCompletionLogProbs(content=[n.ChatCompletionLogProbsContent(
        token=P.lp_token, logprob=P.lp_logprob, bytes=list(P.lp_bytes),
        top_logprobs=[n.ChatCompletionLogProb(token=P.top_token, logprob=P.top_logprob,
                                              bytes=list(P.top_bytes))])])


def _chunk(n: Names, choices: list[Any], **members: Any) -> Any:
    return n.ChatCompletionStreamResponse(id=P.id, object="chat.completion.chunk",
                                          created=P.created, choices=choices, model=P.model,
                                          **members)


def _step(n: Names, rules: Rules, delta: Any, finish: bool) -> Any:
    """A step's chunk as the release's generator builds it around a delta: its logprobs,
    token ids and usage, and on a finish its reason, stop reason and fingerprint (and the
    release's members: ``_extra``)."""
    on_chunk, on_finish = _extra(rules)
    choice = n.ChatCompletionResponseStreamChoice(
        index=P.index, delta=delta, logprobs=_logprobs(n), finish_reason=P.finish_reason,
        stop_reason=P.stop_reason, token_ids=list(P.token_ids), **on_finish) if finish else \
        n.ChatCompletionResponseStreamChoice(index=P.index, delta=delta, logprobs=_logprobs(n),
                                             finish_reason=None, token_ids=list(P.token_ids))
    made = _chunk(n, [choice], **on_chunk)
    if finish:
        made.system_fingerprint = P.system_fingerprint
    made.usage = _usage(n)
    return made


def _chat_probes(n: Names, rules: Rules) -> dict[str, str]:
    """The chat shape's frames: the first chunk, a text step and its finish, a reasoning
    parser's step and its finish (``DeltaMessage(reasoning=...)``), the final usage."""
    start = _chunk(n, [n.ChatCompletionResponseStreamChoice(
        index=P.index, delta=n.DeltaMessage(role=P.role, content=""), logprobs=None,
        finish_reason=None)], prompt_token_ids=list(P.prompt_token_ids), prompt_text=None)
    start.usage = _usage(n)
    final = _chunk(n, [], usage=_usage(n, True), system_fingerprint=P.system_fingerprint,
                   metrics=None)
    frames = {"start": start}
    for step, finish, kind in (("text", "finish", "content"),
                               ("reasoning", "finish_reasoning", "reasoning")):
        frames[step] = _step(n, rules, n.DeltaMessage(**{kind: P.text}), False)
        frames[finish] = _step(n, rules, n.DeltaMessage(**{kind: P.text}), True)
    return {**{name: _frame(made, exclude_unset=True) for name, made in frames.items()},
            "usage": _frame(final, exclude_unset=True, exclude_none=True)}


def _tool_probes(n: Names, rules: Rules, form: ToolForm, chat: dict[str, str]
                 ) -> dict[str, str]:
    """A tool-call form's frames: a call's first piece (its id, type, index and name, and
    the arguments where the form's code sets them: left out when None), a later piece (its
    arguments), and a later piece on the finish chunk; the chat shape's own text and
    finish frames (``chat``: a shape needs a text frame)."""
    content_null, name_null = form

    def delta(call: Any) -> Any:
        return n.DeltaMessage(content=None, tool_calls=[call]) if content_null else \
            n.DeltaMessage(tool_calls=[call])

    def piece() -> Any:
        return n.DeltaToolCall(index=P.tool_index, function=n.DeltaFunctionCall(
            name=None, arguments=P.text) if name_null else n.DeltaFunctionCall(arguments=P.text))

    start = n.DeltaToolCall(id=P.tool_id, type="function", index=P.tool_index,
                            function=n.DeltaFunctionCall(name=P.tool_name, arguments=P.text))
    return {"text": chat["text"], "finish": chat["finish"],
            "tool_start": _frame(_step(n, rules, delta(start), False), exclude_unset=True),
            "tool_args": _frame(_step(n, rules, delta(piece()), False), exclude_unset=True),
            "finish_tool_args": _frame(_step(n, rules, delta(piece()), True),
                                       exclude_unset=True)}


def _empty_probes(n: Names, rules: Rules, chat: dict[str, str]) -> dict[str, str]:
    """The empty-delta step's frame (as ``finish``, its finish reason written null), and
    the chat shape's text frame (``chat``: a shape needs one)."""
    on_chunk, _ = _extra(rules)
    made = _chunk(n, [n.ChatCompletionResponseStreamChoice(
        index=P.index, delta=n.DeltaMessage(), logprobs=_logprobs(n),
        finish_reason=P.finish_reason, token_ids=list(P.token_ids))], **on_chunk)
    made.usage = _usage(n)
    return {"text": chat["text"], "finish": _frame(made, exclude_unset=True)}


def _completion_probes(n: Names, rules: Rules) -> dict[str, str]:
    on_chunk, on_choice = _extra(rules)
    logprobs = n.CompletionLogProbs(
        text_offset=[P.lp_offset], token_logprobs=[P.lp_logprob], tokens=[P.lp_token],
        top_logprobs=[{P.top_token: P.top_logprob}])

    def step(finish: bool) -> Any:
        made = n.CompletionStreamResponse(
            id=P.id, object="text_completion", created=P.created, model=P.model,
            choices=[n.CompletionResponseStreamChoice(
                index=P.index, text=P.text, logprobs=logprobs, finish_reason=P.finish_reason,
                stop_reason=P.stop_reason, prompt_token_ids=list(P.prompt_token_ids),
                token_ids=list(P.token_ids), **on_choice)], **on_chunk)
        if finish:
            made.system_fingerprint = P.system_fingerprint
        made.usage = n.UsageInfo(prompt_tokens=P.prompt_tokens,
                                 completion_tokens=P.completion_tokens,
                                 total_tokens=P.total_tokens)
        return made

    usage = n.UsageInfo(prompt_tokens=P.prompt_tokens, completion_tokens=P.completion_tokens,
                        total_tokens=P.total_tokens)
    usage.prompt_tokens_details = n.PromptTokenUsageInfo(cached_tokens=P.cached_tokens)
    final = n.CompletionStreamResponse(id=P.id, created=P.created, model=P.model, choices=[],
                                       usage=usage, system_fingerprint=P.system_fingerprint,
                                       metrics=None)
    return {"text": _frame(step(False), exclude_unset=True),
            "finish": _frame(step(True), exclude_unset=True),
            "usage": _frame(final, exclude_unset=False, exclude_none=True)}


def build(names: Names, release: Release) -> Context:
    """The context of a known release: its names, rules and the writer's shapes made from
    its own models (ValueError or a pydantic error: its models are not what the rules say)."""
    chat = _chat_probes(names, release.rules)
    return Context(
        names, release,
        StreamShape("chat", chat, style="pydantic", omit_none=_CHAT_OMIT),
        StreamShape("completions", _completion_probes(names, release.rules), style="pydantic",
                    omit_none=_COMPLETION_OMIT),
        {form: StreamShape("chat", _tool_probes(names, release.rules, form, chat),
                           style="pydantic", omit_none=(*_CHAT_OMIT, "tool_start.text"))
         for form in TOOL_FORMS},
        StreamShape("chat", _empty_probes(names, release.rules, chat), style="pydantic",
                    omit_none=_CHAT_OMIT))


# --- the probes: real values, both ways

#: the probe chunks' texts and logprobs: escapes, characters of each UTF-8 length, a line and
#: paragraph separator, a lone byte's U+FFFD; floats of every kind pydantic writes its way
_TEXT = '"q" \\ \n\t\x00\x1f\x7f é ü 中文 🙂 \u2028\u2029 </script> \ufffd'
_LOGPROBS = (-1e-07, -0.0, 0.0, -9999.0, -1.2345678901234567e-05, -3.0, float("nan"),
             -123456.789)
_RID, _MODEL, _CREATED, _FP = "probe-1", "m/é\"", 1700000000, "fp_probe"

Probes = dict[str, tuple[Callable[[], bytes], Callable[[], bytes]]]


def _chat(ctx: Context) -> Probes:
    n = ctx.names
    on_chunk, on_finish = _extra(ctx.release.rules)
    plain = StreamWriter(ctx.chat, id=_RID, model=_MODEL, created=_CREATED, role="assistant")
    stamped = StreamWriter(ctx.chat, id=_RID, model=_MODEL, created=_CREATED,
                           role="assistant", system_fingerprint=_FP)
    empty = StreamWriter(ctx.empty, id=_RID, model=_MODEL, created=_CREATED, role="assistant")
    tokens = [_TEXT, "a", "\ufffd", "a"]
    values = _LOGPROBS

    def chunk(choices: list[Any], usage: tuple[int, ...] | None = None, **extra: Any) -> Any:
        made = n.ChatCompletionStreamResponse(id=_RID, object="chat.completion.chunk",
                                              created=_CREATED, choices=choices, model=_MODEL,
                                              **extra)
        if usage is not None:  # (a third count: the reasoning tokens of a reasoning parser)
            made.usage = n.UsageInfo(
                prompt_tokens=usage[0], completion_tokens=usage[1],
                total_tokens=usage[0] + usage[1], completion_tokens_details=None
                if len(usage) < 3 else n.make_completion_tokens_details(usage[2]))
        return made

    def start(ids: list[int] | None, usage: tuple[int, ...] | None) -> Any:
        return chunk([n.ChatCompletionResponseStreamChoice(
            index=1, delta=n.DeltaMessage(role="assistant", content=""), logprobs=None,
            finish_reason=None)], usage, prompt_token_ids=ids, prompt_text=None)

    def logprobs(count: int = len(tokens)) -> Any:
        return n.ChatCompletionLogProbs(content=[n.ChatCompletionLogProbsContent(
            token=token, logprob=values[k], bytes=list(token.encode("utf-8", "replace")),
            top_logprobs=[n.ChatCompletionLogProb(
                token=top, logprob=value, bytes=list(top.encode("utf-8", "replace")))
                for top, value in zip(tokens, values[k:], strict=False)])
            for k, token in enumerate(tokens[:count])])

    entries = [(token, values[k], token.encode("utf-8", "replace"),
                [(top, value, top.encode("utf-8", "replace"))
                 for top, value in zip(tokens, values[k:], strict=False)])
               for k, token in enumerate(tokens)]
    step = n.ChatCompletionResponseStreamChoice

    def final(reasoning: int | None = None) -> Any:
        usage = n.UsageInfo(prompt_tokens=3, completion_tokens=5, total_tokens=8,
                            completion_tokens_details=None if reasoning is None else
                            n.make_completion_tokens_details(reasoning))
        usage.prompt_tokens_details = n.make_prompt_tokens_details(False, 2, None, None)
        return n.ChatCompletionStreamResponse(id=_RID, object="chat.completion.chunk",
                                              created=_CREATED, choices=[], model=_MODEL,
                                              usage=usage, system_fingerprint=_FP,
                                              metrics=None)

    unset = {"exclude_unset": True}
    return {
        "the chat role chunk": (
            lambda: plain.write("start", index=1, usage=(3, 0), prompt_token_ids=[7, 2**31 - 1]),
            lambda: _frame(start([7, 2**31 - 1], (3, 0)), **unset).encode()),
        "the chat role chunk without ids": (
            lambda: plain.write("start", index=1),
            lambda: _frame(start(None, None), **unset).encode()),
        "a chat step": (
            lambda: plain.step(_TEXT, 2),
            lambda: _frame(chunk([step(
                index=2, delta=n.DeltaMessage(content=_TEXT), logprobs=None,
                finish_reason=None, token_ids=None)], **on_chunk), **unset).encode()),
        "a chat step with logprobs": (
            lambda: plain.step(_TEXT, 0, token_ids=[5, 6, 7, 8], logprobs=entries,
                               usage=(3, 4)),
            lambda: _frame(chunk([step(
                index=0, delta=n.DeltaMessage(content=_TEXT), logprobs=logprobs(),
                finish_reason=None, token_ids=[5, 6, 7, 8])], (3, 4), **on_chunk),
                **unset).encode()),
        "the chat finish chunk": (
            lambda: stamped.step("", 0, finish_reason="stop", stop_reason="\n"),
            lambda: _frame(chunk([step(
                index=0, delta=n.DeltaMessage(content=""), logprobs=None, finish_reason="stop",
                stop_reason="\n", token_ids=None, **on_finish)], system_fingerprint=_FP,
                **on_chunk), **unset).encode()),
        "the chat finish chunk with usage": (
            lambda: plain.step("!", 1, token_ids=[9], finish_reason="length", stop_reason=2,
                               usage=(3, 5)),
            lambda: _frame(chunk([step(
                index=1, delta=n.DeltaMessage(content="!"), logprobs=None,
                finish_reason="length", stop_reason=2, token_ids=[9], **on_finish)], (3, 5),
                **on_chunk), **unset).encode()),
        "the chat empty finish chunk": (  # (0.33 on: an empty first output that finishes)
            lambda: plain.step(None, 0, token_ids=[], logprobs=[], finish_reason="abort"),
            lambda: _frame(chunk([step(
                index=0, delta=n.DeltaMessage(), logprobs=logprobs(0), finish_reason="abort",
                stop_reason=None, token_ids=[], **on_finish)], **on_chunk), **unset).encode()),
        "the chat usage chunk": (
            lambda: stamped.usage(3, 5),
            lambda: _frame(final(), exclude_unset=True, exclude_none=True).encode()),
        "the chat role chunk with reasoning tokens": (
            lambda: plain.write("start", index=1, usage=Usage(3, 0, None, 0)),
            lambda: _frame(start(None, (3, 0, 0)), **unset).encode()),
        "a chat reasoning step": (
            lambda: plain.step(_TEXT, 1, kind="reasoning", usage=Usage(3, 4, None, 4)),
            lambda: _frame(chunk([step(
                index=1, delta=n.DeltaMessage(reasoning=_TEXT), logprobs=None,
                finish_reason=None, token_ids=None)], (3, 4, 4), **on_chunk),
                **unset).encode()),
        "a chat reasoning step with logprobs": (
            lambda: plain.step(_TEXT, 0, kind="reasoning", token_ids=[5, 6, 7, 8],
                               logprobs=entries),
            lambda: _frame(chunk([step(
                index=0, delta=n.DeltaMessage(reasoning=_TEXT), logprobs=logprobs(),
                finish_reason=None, token_ids=[5, 6, 7, 8])], **on_chunk), **unset).encode()),
        "the chat reasoning finish chunk": (
            lambda: stamped.step("a", 0, kind="reasoning", finish_reason="length",
                                 stop_reason=None),
            lambda: _frame(chunk([step(
                index=0, delta=n.DeltaMessage(reasoning="a"), logprobs=None,
                finish_reason="length", stop_reason=None, token_ids=None, **on_finish)],
                system_fingerprint=_FP, **on_chunk), **unset).encode()),
        "the chat finish chunk with reasoning tokens": (
            lambda: plain.step("!", 1, finish_reason="stop", usage=Usage(3, 5, None, 0)),
            lambda: _frame(chunk([step(
                index=1, delta=n.DeltaMessage(content="!"), logprobs=None,
                finish_reason="stop", stop_reason=None, token_ids=None, **on_finish)],
                (3, 5, 0), **on_chunk), **unset).encode()),
        "the chat usage chunk with reasoning tokens": (
            lambda: stamped.usage(3, 5, None, 2),
            lambda: _frame(final(2), exclude_unset=True, exclude_none=True).encode()),
        "a chat step with an empty delta": (
            lambda: empty.write("finish", None, 1, token_ids=[5, 6, 7, 8], logprobs=entries,
                                usage=(3, 4)),
            lambda: _frame(chunk([step(index=1, delta=n.DeltaMessage(), logprobs=logprobs(),
                                       finish_reason=None, token_ids=[5, 6, 7, 8])], (3, 4),
                                 **on_chunk), **unset).encode()),
        "a chat step with an empty delta, token ids alone": (
            lambda: empty.write("finish", None, 0, token_ids=[5], usage=Usage(3, 4, None, 2)),
            lambda: _frame(chunk([step(index=0, delta=n.DeltaMessage(), logprobs=None,
                                       finish_reason=None, token_ids=[5])], (3, 4, 2),
                                 **on_chunk), **unset).encode()),
        **{f"{name} {form}": made for form in TOOL_FORMS
           for name, made in _tool_calls(ctx, form, chunk, entries, logprobs).items()},
    }


def _tool_calls(ctx: Context, form: ToolForm, chunk: Callable[..., Any], entries: list[Any],
                logprobs: Callable[..., Any]) -> Probes:
    """A tool-call form's probe chunks: a call's first piece with and without its
    arguments, a later piece with logprobs and usage, one on the finish chunk."""
    n = ctx.names
    on_chunk, on_finish = _extra(ctx.release.rules)
    shape = ctx.tools[form]
    plain = StreamWriter(shape, id=_RID, model=_MODEL, created=_CREATED, role="assistant")
    stamped = StreamWriter(shape, id=_RID, model=_MODEL, created=_CREATED, role="assistant",
                           system_fingerprint=_FP)
    content_null, name_null = form
    step = n.ChatCompletionResponseStreamChoice

    def delta(call: Any) -> Any:
        return n.DeltaMessage(content=None, tool_calls=[call]) if content_null else \
            n.DeltaMessage(tool_calls=[call])

    def start(arguments: str | None) -> Any:
        function = {"name": "get_wéather\"\n"} if arguments is None else \
            {"name": "f", "arguments": arguments}
        return n.DeltaToolCall(index=3, type="function", id="chatcmpl-tool-é\"1",
                               function=n.DeltaFunctionCall(**function))

    def piece(arguments: str, index: int = 1) -> Any:
        return n.DeltaToolCall(index=index, function=n.DeltaFunctionCall(
            name=None, arguments=arguments) if name_null else
            n.DeltaFunctionCall(arguments=arguments))

    unset = {"exclude_unset": True}
    return {
        "a tool call's first piece": (
            lambda: plain.write("tool_start", None, 1, tool_index=3,
                                tool_id="chatcmpl-tool-é\"1", tool_name="get_wéather\"\n"),
            lambda: _frame(chunk([step(index=1, delta=delta(start(None)), logprobs=None,
                                       finish_reason=None, token_ids=None)], **on_chunk),
                           **unset).encode()),
        "a tool call's first piece with arguments": (
            lambda: plain.write("tool_start", '{"a": "é', 0, tool_index=3,
                                tool_id="chatcmpl-tool-é\"1", tool_name="f",
                                token_ids=[5, 6, 7, 8], logprobs=entries, usage=(3, 4)),
            lambda: _frame(chunk([step(index=0, delta=delta(start('{"a": "é')),
                                       logprobs=logprobs(), finish_reason=None,
                                       token_ids=[5, 6, 7, 8])], (3, 4), **on_chunk),
                           **unset).encode()),
        "a tool call's piece": (
            lambda: plain.write("tool_args", _TEXT, 2, tool_index=1, usage=Usage(3, 4, None, 1)),
            lambda: _frame(chunk([step(index=2, delta=delta(piece(_TEXT)), logprobs=None,
                                       finish_reason=None, token_ids=None)], (3, 4, 1),
                                 **on_chunk), **unset).encode()),
        "a tool call's piece on the finish chunk": (
            lambda: stamped.write("finish_tool_args", "}", 0, tool_index=0,
                                  finish_reason="tool_calls", token_ids=[9]),
            lambda: _frame(chunk([step(index=0, delta=delta(piece("}", 0)), logprobs=None,
                                       finish_reason="tool_calls", stop_reason=None,
                                       token_ids=[9], **on_finish)], system_fingerprint=_FP,
                                 **on_chunk), **unset).encode()),
    }


def _completion(ctx: Context) -> Probes:
    n = ctx.names
    on_chunk, on_choice = _extra(ctx.release.rules)
    plain = StreamWriter(ctx.completion, id=_RID, model=_MODEL, created=_CREATED)
    stamped = StreamWriter(ctx.completion, id=_RID, model=_MODEL, created=_CREATED,
                           system_fingerprint=_FP)
    tokens = [_TEXT, "a", "\ufffd", "\ufffd"]  # (a text twice: one key in vLLM's dict)
    values = _LOGPROBS
    offsets = [4, 4 + len(tokens[0]), 5 + len(tokens[0]), 6 + len(tokens[0])]

    def chunk(choice: Any, usage: tuple[int, int] | None = None, **extra: Any) -> Any:
        made = n.CompletionStreamResponse(id=_RID, object="text_completion", created=_CREATED,
                                          model=_MODEL, choices=[choice], **extra, **on_chunk)
        if usage is not None:
            made.usage = n.UsageInfo(prompt_tokens=usage[0], completion_tokens=usage[1],
                                     total_tokens=sum(usage))
        return made

    def logprobs() -> Any:
        return n.CompletionLogProbs(
            text_offset=offsets, token_logprobs=list(values[:len(tokens)]), tokens=tokens,
            top_logprobs=[{top: value for top, value in zip(tokens, values[k:], strict=False)}
                          for k in range(len(tokens))])

    entries = [(token, values[k], None, list(zip(tokens, values[k:], strict=False)),
                offsets[k]) for k, token in enumerate(tokens)]

    def choice(**members: Any) -> Any:
        return n.CompletionResponseStreamChoice(**members, **on_choice)

    def final(cached: int | None, fingerprint: str | None) -> Any:
        usage = n.UsageInfo(prompt_tokens=5, completion_tokens=7, total_tokens=12)
        if cached is not None:
            usage.prompt_tokens_details = n.PromptTokenUsageInfo(cached_tokens=cached)
        return n.CompletionStreamResponse(id=_RID, created=_CREATED, model=_MODEL, choices=[],
                                          usage=usage, system_fingerprint=fingerprint,
                                          metrics=None)

    unset = {"exclude_unset": True}
    every = {"exclude_unset": False, "exclude_none": True}
    return {
        "a completions step with logprobs": (
            lambda: plain.step(_TEXT, 3, token_ids=[5, 6, 7, 8], logprobs=entries,
                               usage=(5, 4), prompt_token_ids=[1, 2**31 - 1]),
            lambda: _frame(chunk(choice(
                index=3, text=_TEXT, logprobs=logprobs(), finish_reason=None,
                stop_reason=None, prompt_token_ids=[1, 2**31 - 1], token_ids=[5, 6, 7, 8]),
                (5, 4)), **unset).encode()),
        "a completions step": (
            lambda: plain.step("x", 0),
            lambda: _frame(chunk(choice(
                index=0, text="x", logprobs=None, finish_reason=None, stop_reason=None,
                prompt_token_ids=None, token_ids=None)), **unset).encode()),
        "the completions finish chunk": (
            lambda: stamped.step("", 1, finish_reason="stop", stop_reason=2),
            lambda: _frame(chunk(choice(
                index=1, text="", logprobs=None, finish_reason="stop", stop_reason=2,
                prompt_token_ids=None, token_ids=None), system_fingerprint=_FP),
                **unset).encode()),
        "the completions usage chunk": (
            lambda: stamped.usage(5, 7, 4),
            lambda: _frame(final(4, _FP), **every).encode()),
        "the completions usage chunk without details": (
            lambda: plain.usage(5, 7),
            lambda: _frame(final(None, None), **every).encode()),
    }


def probes(ctx: Context) -> list[str]:
    """The probe chunks whose bytes by the context's shapes are not those of the release's
    own models, built as its generators build them and dumped by pydantic as they dump them
    (a probe that raises is one of them)."""
    differ = []
    for made in (_chat, _completion):
        try:
            found = made(ctx)
        except Exception:  # (vLLM's models are not what they were: none can be written)
            log.debug("tokcore's vLLM plugin: a probe could not be made", exc_info=True)
            differ.append(f"the {made.__name__[1:]} probes")
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
