"""The chat stream of a covered request (``_vllm_coverage``), written by the stream writer
straight from the engine's ``RequestOutput`` s: vLLM 0.32's
``chat_completion_stream_generator``, and 0.33's and 0.34's ``chat_completion_stream_generator``
(the wrapper that dumps) and ``chat_completion_stream_generator_raw`` (what it dumps, a step's
delta by ``ChatStreamProcessor.step``) together. Without a parser the delta is the step's
text; with a reasoning or tool parser (``_vllm_coverage.parser_covered``) it is what vLLM's
own parser returns, one parser a choice, made and called as that release's generator makes
and calls it (0.32: ``parse_delta``, its ``tools_streamed`` finish rule and
``maybe_filter_parallel_tool_calls``; 0.33 on: vLLM's ``ChatStreamProcessor.step``), and the
usage counts its reasoning tokens by the parser's ``count_reasoning_tokens`` as vLLM does. A
delta of one text of one kind (``content``, ``reasoning``; nothing, on a finish or a step
with logprobs or token ids) or of one tool call's piece (its first, with its id, type and
name; a later one, its arguments) is written by the writer's frames (a tool call's in the
shape of its form: ``_vllm_shapes.TOOL_FORMS``); any other (reasoning and content in one
step, several calls, text beside a call, a member set to None) by vLLM's models
(``_vllm_fallback``). What differs between the releases is the context's ``Rules``
(``_vllm_releases``) and its shapes (``_vllm_shapes``)."""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from ..writer._writer import StreamWriter
from . import _vllm_fallback as fallback
from ._vllm_logprobs import Odd, chat_logprobs
from ._vllm_processor import mark, unmark
from ._vllm_shapes import Context

__all__ = ["stream"]

log = logging.getLogger("tokcore.plugins.vllm")


def _frame(data: str) -> bytes:
    return f"data: {data}\n\n".encode()


def _written(delta: Any, delta_class: Any) -> tuple[str, str | None] | None:
    """What the writer writes of a parser's delta without tool calls: its kind and text
    (text None: nothing, ``"delta":{}``); None where its frames do not write it as pydantic
    dumps it (a delta with tool calls: ``_tool_written``)."""
    if type(delta) is not delta_class or delta.__pydantic_extra__ or delta.tool_calls:
        return None
    fields = delta.__pydantic_fields_set__  # (model_fields_set: the members its maker set)
    if "tool_calls" in fields:  # (empty: vLLM's serializer drops it)
        fields = fields - {"tool_calls"}
    if not fields:
        return "text", None
    if len(fields) == 1:
        if "content" in fields:
            if type(delta.content) is str:
                return "text", delta.content
        elif "reasoning" in fields and type(delta.reasoning) is str:
            return "reasoning", delta.reasoning
    return None


#: a tool call's first piece as its maker sets it, and a later piece; a delta's members
_START = frozenset({"id", "type", "index", "function"})
_PIECE = frozenset({"index", "function"})
_NAME = frozenset({"name"})
_NAMED = frozenset({"name", "arguments"})
_ARGUMENTS = frozenset({"arguments"})
_DELTA = frozenset({"content", "tool_calls"})
#: the forms (_vllm_shapes.TOOL_FORMS) by whether the delta's content is set (to None)
_FORM = {True: (True, False), False: (False, False)}
_REQUIRED_FORM = (False, True)


def _tool_written(delta: Any, names: Any) -> tuple[Any, ...] | None:
    """What the writer writes of a parser's delta with one tool call (its form's shape,
    ``_vllm_shapes.TOOL_FORMS``): ``("tool_start", form, index, id, name, arguments or
    None)`` or ``("tool_args", form, index, arguments)``; None for any other delta (several
    calls, content or reasoning beside a call, a member set otherwise), which vLLM's models
    write. (The members set are read as ``model_fields_set`` holds them.)"""
    calls = delta.tool_calls
    if type(calls) is not list or len(calls) != 1 or type(delta) is not names.DeltaMessage \
            or delta.__pydantic_extra__:
        return None
    fields = delta.__pydantic_fields_set__
    if not fields <= _DELTA:
        return None
    content_null = "content" in fields
    if content_null and delta.content is not None:
        return None
    call = calls[0]
    if type(call) is not names.DeltaToolCall or call.__pydantic_extra__:
        return None
    function = call.function
    index = call.index
    if type(function) is not names.DeltaFunctionCall or type(index) is not int:
        return None
    held = call.__pydantic_fields_set__
    done = function.__pydantic_fields_set__
    arguments = function.arguments
    if held == _PIECE:  # (the common one: a later piece, its arguments)
        if type(arguments) is str:
            if done == _ARGUMENTS:
                return "tool_args", _FORM[content_null], index, arguments
            if done == _NAMED and function.name is None and not content_null:
                return "tool_args", _REQUIRED_FORM, index, arguments
        return None
    if held != _START or type(call.id) is not str or call.type != "function" or \
            type(function.name) is not str:
        return None
    if done == _NAME:
        return "tool_start", _FORM[content_null], index, call.id, function.name, None
    if done == _NAMED and type(arguments) is str:
        return "tool_start", _FORM[content_null], index, call.id, function.name, arguments
    return None


async def stream(ctx: Context, serving: Any, request: Any,
                 result_generator: AsyncIterator[Any], request_id: str, model_name: str,
                 tokenizer: Any, request_metadata: Any,
                 chat_template_kwargs: Any = None) -> AsyncGenerator[bytes, None]:
    """The stream's bytes, vLLM's own but for ``created`` (the clock's)."""
    names, rules = ctx.names, ctx.release.rules
    created = int(time.time())
    n = 1 if request.n is None else request.n
    parsers: list[Any] | None = None
    processors: list[Any] = []
    if serving.parser_cls is not None:  # (a reasoning parser: made as vLLM makes it)
        try:
            if tokenizer is None:
                raise ValueError("Tokenizer not available when `skip_tokenizer_init=True`")
            parsers = [serving._make_parser(request, tokenizer, chat_template_kwargs)
                       for _ in range(n)]
            if rules.chat_step_processor:
                processors = [names.ChatStreamProcessor(
                    request, parser, enable_auto_tools=serving.enable_auto_tools,
                    parser_cls=serving.parser_cls) for parser in parsers]
        except Exception as e:
            log.exception("Error in parser creation.")
            yield _frame(serving.create_error_response(e).model_dump_json()
                         if rules.chat_error_model else
                         serving.create_streaming_error_response(e))
            yield b"data: [DONE]\n\n"
            return
    previous_num_tokens = [0] * n
    finish_sent = [False] * n
    num_prompt_tokens = 0
    include_usage, continuous = names.should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    role = serving.get_chat_request_role(request)
    fingerprint = serving.system_fingerprint
    plain = StreamWriter(ctx.chat, id=request_id, model=model_name, created=created, role=role)
    stamped = plain if fingerprint is None else StreamWriter(
        ctx.chat, id=request_id, model=model_name, created=created, role=role,
        system_fingerprint=fingerprint)
    last = plain if include_usage else stamped
    want_logprobs = bool(request.logprobs)
    top = request.top_logprobs
    every = bool(request.logprob_token_ids)
    as_ids = request.return_tokens_as_token_ids
    if as_ids is None:
        as_ids = serving.return_tokens_as_token_ids
    return_ids = request.return_token_ids
    kv_transfer = rules.kv_transfer_params
    empty_finish = rules.empty_finish
    #: a chunk without a finish is text and index alone (the writer's cheapest call)
    quiet = not want_logprobs and not return_ids and not continuous
    bare = quiet and parsers is None
    # a reasoning parser's: its deltas, the reasoning tokens its usage counts
    hide = parsers is not None and not request.include_reasoning
    reasoning = [0] * n if parsers is not None and serving._include_reasoning_tokens_details \
        else None
    generated: list[list[int]] = [[] for _ in range(n)] if reasoning is not None else []
    tools_streamed = [False] * n
    # (0.32 keeps "stop" when the named function's name is truthy, as its code reads it)
    named_tool = parsers is not None and not rules.chat_step_processor and \
        isinstance(request.tool_choice, names.ChatCompletionNamedToolChoiceParam) and \
        bool(request.tool_choice.function.name)
    delta_class = names.DeltaMessage
    # a tool parser's: a writer per tool-call form met; 0.32's filter of parallel calls
    tool_writers: dict[Any, StreamWriter] = {}
    empty_writer: StreamWriter | None = None
    filter_calls = parsers is not None and not rules.chat_step_processor and \
        request.parallel_tool_calls is False
    generation_error = names.GenerationError
    last_res = None
    usage: Any = None  # (two counts, or four: the reasoning tokens last)
    out: list[bytes] = []  # (the step's chunks not yet written)
    # (until the first step: the requests result_generator adds are ours)
    token: contextvars.Token[bool] | None = mark()
    try:
        first = True
        async for res in result_generator:
            last_res = res
            if res.prompt_token_ids is not None:
                num_prompt_tokens = len(res.prompt_token_ids)
                if res.encoder_prompt_token_ids is not None:
                    num_prompt_tokens += len(res.encoder_prompt_token_ids)
            if first:
                token = unmark(token)
                prompt_ids = res.prompt_token_ids if return_ids else None
                usage = None if not continuous else (num_prompt_tokens, 0) \
                    if reasoning is None else (num_prompt_tokens, 0, None, 0)
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
                    if not hide:  # (hidden reasoning: vLLM drops a step's logprobs)
                        try:
                            logprobs = chat_logprobs(token_ids, output.logprobs, top, every,
                                                     as_ids)
                        except Odd:
                            odd = True
                text = output.text
                empty = False
                if not text and not token_ids and not previous_num_tokens[i]:
                    if finish is None or not empty_finish:
                        continue
                    empty = True  # (0.33 on: the finish of an empty output, "delta":{})
                if parsers is not None:
                    ids_list = token_ids if isinstance(token_ids, list) else list(token_ids)
                    if processors:  # (0.33 on: vLLM's step, its parser's delta)
                        delta, finish = processors[i].step(text, ids_list, finish,
                                                           res.prompt_token_ids)
                    else:  # (0.32: the generator's own calls)
                        delta = parsers[i].parse_delta(
                            delta_text=text, delta_token_ids=ids_list, request=request,
                            prompt_token_ids=res.prompt_token_ids, finished=finish is not None)
                        if delta is not None and delta.tool_calls:
                            tools_streamed[i] = True
                        if finish is not None:
                            finish = "tool_calls" if tools_streamed[i] and not named_tool and \
                                finish == "stop" else finish or "stop"
                    previous_num_tokens[i] += len(token_ids)
                    if reasoning is not None:
                        generated[i].extend(token_ids)
                        if continuous:
                            reasoning[i] = parsers[i].count_reasoning_tokens(
                                tuple(generated[i]))
                    if delta is None:  # (the parser has nothing to write yet)
                        if finish is None and (not want_logprobs or hide) and \
                                (not return_ids or hide):
                            continue
                        delta = delta_class()
                    elif quiet and finish is None:  # (the common step: one text, no more)
                        written = _written(delta, delta_class)
                        if written is not None and written[1] is not None:
                            out.append(plain.text(written[1], i) if written[0] == "text" else
                                       plain.step(written[1], i, written[0]))
                            continue
                    ids = ids_list if return_ids and not hide else None
                    usage = None if not continuous else \
                        (num_prompt_tokens, previous_num_tokens[i]) if reasoning is None else \
                        (num_prompt_tokens, previous_num_tokens[i], None, reasoning[i])
                    if finish is not None:
                        finish_sent[i] = True
                        if kv_transfer and res.kv_transfer_params is not None:
                            odd = True
                    if delta.tool_calls:  # (a tool parser's: one call, its form's frames)
                        if filter_calls:  # (0.32: vLLM filters the choice it builds)
                            delta = names.maybe_filter_parallel_tool_calls(delta, request)
                        tool = None if odd else _tool_written(delta, names)
                        if tool is not None and (tool[0] == "tool_args" or finish is None):
                            form = tool[1]
                            if finish is None:
                                writer = tool_writers.get(form)
                                if writer is None:
                                    writer = tool_writers[form] = StreamWriter(
                                        ctx.tools[form], id=request_id, model=model_name,
                                        created=created, role=role)
                                out.append(writer.write(
                                    "tool_start", tool[5], i, token_ids=ids,
                                    logprobs=logprobs, usage=usage, tool_index=tool[2],
                                    tool_id=tool[3], tool_name=tool[4])
                                    if tool[0] == "tool_start" else writer.write(
                                    "tool_args", tool[3], i, token_ids=ids, logprobs=logprobs,
                                    usage=usage, tool_index=tool[2]))
                            else:
                                out.append(StreamWriter(
                                    ctx.tools[form], id=request_id, model=model_name,
                                    created=created, role=role, system_fingerprint=None
                                    if include_usage else fingerprint).write(
                                    "finish_tool_args", tool[3], i, token_ids=ids,
                                    logprobs=logprobs, finish_reason=finish,
                                    stop_reason=output.stop_reason, usage=usage,
                                    tool_index=tool[2]))
                            continue
                    written = None if odd else _written(delta, delta_class)
                    if written is not None and finish is None and written[1] is None:
                        # (a step with nothing but its logprobs or token ids: "delta":{})
                        if empty_writer is None:
                            empty_writer = StreamWriter(ctx.empty, id=request_id,
                                                        model=model_name, created=created,
                                                        role=role)
                        out.append(empty_writer.write("finish", None, i, token_ids=ids,
                                                      logprobs=logprobs, usage=usage))
                    elif written is None:
                        out.append(fallback.chat_step(
                            ctx, serving, request, tokenizer, output, ids, usage, finish,
                            include_usage, request_id, model_name, created,
                            res.kv_transfer_params if kv_transfer else None, False, delta,
                            hide))
                    elif finish is None:
                        out.append(plain.step(written[1], i, written[0], ids, logprobs,
                                              usage=usage))
                    else:
                        out.append(last.step(written[1], i, written[0], ids, logprobs,
                                             finish, output.stop_reason, usage))
                    continue
                previous_num_tokens[i] += len(token_ids)
                ids = (token_ids if type(token_ids) is list else list(token_ids)) \
                    if return_ids else None
                usage = (num_prompt_tokens, previous_num_tokens[i]) if continuous else None
                if finish is not None:
                    finish = finish or "stop"
                    finish_sent[i] = True
                    if kv_transfer and res.kv_transfer_params is not None:
                        odd = True
                if odd:
                    out.append(fallback.chat_step(
                        ctx, serving, request, tokenizer, output, ids, usage, finish,
                        include_usage, request_id, model_name, created,
                        res.kv_transfer_params if kv_transfer else None, empty))
                elif finish is None:
                    out.append(plain.text(text, i) if bare else plain.step(
                        text, i, token_ids=ids, logprobs=logprobs, usage=usage))
                else:
                    out.append(last.step(None if empty else text, i, token_ids=ids,
                                         logprobs=logprobs, finish_reason=finish,
                                         stop_reason=output.stop_reason, usage=usage))
            if out:  # (a step's chunks in one write: one send through the app, not one each)
                step = out[0] if len(out) == 1 else b"".join(out)
                out = []
                yield step
        token = unmark(token)  # (no step came)
        completion_tokens = sum(previous_num_tokens)
        reasoning_tokens = None
        if reasoning is not None and parsers is not None:
            if not continuous:
                for i, parser in enumerate(parsers):
                    if generated[i]:
                        reasoning[i] = parser.count_reasoning_tokens(tuple(generated[i]))
            reasoning_tokens = sum(reasoning)
        if include_usage:
            metrics = names.build_spec_decoding_metrics(last_res) if n == 1 else None
            if metrics is None:
                yield stamped.usage(num_prompt_tokens, completion_tokens, None,
                                    reasoning_tokens)
            else:
                yield fallback.final_usage(ctx, True, serving, request_id, model_name, created,
                                           num_prompt_tokens, completion_tokens, None, metrics,
                                           reasoning_tokens)
        request_metadata.final_usage_info = names.UsageInfo(
            prompt_tokens=num_prompt_tokens, completion_tokens=completion_tokens,
            total_tokens=num_prompt_tokens + completion_tokens,
            completion_tokens_details=None if reasoning_tokens is None else
            names.make_completion_tokens_details(reasoning_tokens))
    except generation_error as e:
        token = unmark(token)
        if out:  # (vLLM's generator wrote the step's chunks before the one that raised)
            yield b"".join(out)
        if rules.chat_error_model:
            yield _frame(serving.create_error_response(
                str(e), err_type="InternalServerError",
                status_code=e.status_code).model_dump_json())  # type: ignore[attr-defined]
        else:
            yield _frame(serving._convert_generation_error_to_streaming_response(e))
    except Exception as e:
        token = unmark(token)
        log.exception("Error in chat completion stream generator.")
        if out:
            yield b"".join(out)
        yield _frame(serving.create_error_response(e).model_dump_json()
                     if rules.chat_error_model else serving.create_streaming_error_response(e))
    except BaseException:  # (a cancellation while the first step is awaited)
        unmark(token)
        raise
    yield b"data: [DONE]\n\n"
