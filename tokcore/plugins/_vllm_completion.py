"""The completions stream of a covered request (``_vllm_coverage``), written by the stream
writer straight from the engine's ``RequestOutput`` s: vLLM's ``completion_stream_generator``
of 0.32, 0.33 and 0.34 (whose plain deltas, written from a template of its own, are the same
bytes as its model's). What differs between the releases is the context's ``Rules``
(``_vllm_releases``) and its shapes (``_vllm_shapes``)."""

from __future__ import annotations

import contextvars
import logging
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from ..writer._writer import StreamWriter
from . import _vllm_fallback as fallback
from ._vllm_logprobs import Odd, completion_logprobs
from ._vllm_processor import mark, unmark
from ._vllm_shapes import Context

__all__ = ["stream"]

log = logging.getLogger("tokcore.plugins.vllm")


async def stream(ctx: Context, serving: Any, request: Any, engine_inputs: Any,
                 result_generator: AsyncIterator[Any], request_id: str, created: int,
                 model_name: str, num_prompts: int, tokenizer: Any,
                 request_metadata: Any) -> AsyncGenerator[bytes, None]:
    """The stream's bytes, vLLM's own."""
    names, rules = ctx.names, ctx.release.rules
    n = 1 if request.n is None else request.n
    next_offsets = [0] * n * num_prompts
    previous_num_tokens = [0] * n * num_prompts
    echoed = [False] * n * num_prompts
    num_prompt_tokens = [0] * num_prompts
    num_cached_tokens = None
    include_usage, continuous = names.should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    fingerprint = serving.system_fingerprint
    plain = StreamWriter(ctx.completion, id=request_id, model=model_name, created=created)
    stamped = plain if fingerprint is None else StreamWriter(
        ctx.completion, id=request_id, model=model_name, created=created,
        system_fingerprint=fingerprint)
    last = plain if include_usage else stamped
    top = request.logprobs
    every = bool(request.logprob_token_ids)
    as_ids = request.return_tokens_as_token_ids
    if as_ids is None:
        as_ids = serving.return_tokens_as_token_ids
    return_ids = request.return_token_ids
    echo = request.echo
    kv_transfer = rules.kv_transfer_params
    empty_finish = rules.empty_finish
    #: a chunk without a finish is text and index alone (the writer's cheapest call)
    bare = top is None and not return_ids and not continuous and not echo
    max_tokens = request.max_tokens
    generation_error = names.GenerationError
    last_res = None
    out: list[bytes] = []  # (the step's chunks not yet written)
    delta_ids: Any = None
    # (until the first step: the requests result_generator adds are ours)
    token: contextvars.Token[bool] | None = mark()
    try:
        first = True
        async for prompt_idx, res in result_generator:
            last_res = res
            prompt_token_ids = res.prompt_token_ids
            if prompt_token_ids is not None:
                num_prompt_tokens[prompt_idx] = len(prompt_token_ids)
            if bare and not first:
                outputs = res.outputs
                if len(outputs) == 1 and outputs[0].finish_reason is None:
                    # the common step: one output, its chunk text and index alone (no echo:
                    # the prompt's text is not needed)
                    output = outputs[0]
                    text = output.text
                    delta_ids = output.token_ids
                    i = output.index + prompt_idx * n
                    if text or delta_ids or previous_num_tokens[i]:
                        previous_num_tokens[i] += len(delta_ids)
                        yield plain.text(text, i)
                    continue
            if first:
                token = unmark(token)
                num_cached_tokens = res.num_cached_tokens
                first = False
            prompt_text = res.prompt
            if prompt_text is None:
                prompt_text = serving._extract_prompt_text(engine_inputs[prompt_idx])
            for output in res.outputs:
                i = output.index + prompt_idx * n
                finish = output.finish_reason
                if finish is not None:  # (vLLM's check raises for "error" alone)
                    serving._raise_if_error(finish, request_id)
                prompt_ids = None
                assert max_tokens is not None
                if echo and not echoed[i]:
                    assert prompt_token_ids is not None
                    if return_ids:
                        prompt_text = ""
                    assert prompt_text is not None
                    text = prompt_text if max_tokens == 0 else \
                        prompt_text + output.text
                    prompt_ids = prompt_token_ids
                    echoed[i] = True
                    delta_ids = None
                else:
                    text = output.text
                    delta_ids = output.token_ids
                    if not echoed[i] and return_ids:
                        prompt_ids = prompt_token_ids
                        echoed[i] = True
                    if not text and not delta_ids and not previous_num_tokens[i] and \
                            (finish is None or not empty_finish):
                        continue
                    if bare and finish is None:  # (the common chunk: text and index alone)
                        previous_num_tokens[i] += len(delta_ids)
                        out.append(plain.text(text, i))
                        continue
                # (0.33 on: a finish chunk carrying kv_transfer_params is vLLM's models')
                odd = kv_transfer and finish is not None and res.kv_transfer_params is not None
                logprobs = None
                if top is not None and not odd:  # (never with echo: not covered)
                    assert output.logprobs is not None, "Did not output logprobs"
                    try:
                        logprobs, offset = completion_logprobs(
                            delta_ids, output.logprobs, top, every, as_ids, next_offsets[i])
                        if offset is not None:
                            next_offsets[i] = offset
                    except Odd:
                        odd = True
                previous_num_tokens[i] += len(output.token_ids)
                ids = None
                if return_ids:
                    ids = output.token_ids if type(output.token_ids) is list else \
                        list(output.token_ids)
                usage = (num_prompt_tokens[prompt_idx], previous_num_tokens[i]) \
                    if continuous else None
                if odd:
                    out.append(fallback.completion_step(
                        ctx, serving, request, tokenizer, output, delta_ids, i, text, ids,
                        prompt_ids, usage, include_usage, next_offsets, request_id,
                        model_name, created, res.kv_transfer_params if kv_transfer else None))
                else:
                    out.append((plain if finish is None else last).step(
                        text, i, token_ids=ids, logprobs=logprobs, finish_reason=finish,
                        stop_reason=output.stop_reason, usage=usage,
                        prompt_token_ids=prompt_ids))
            if out:  # (a step's chunks in one write: one send through the app, not one each)
                step = out[0] if len(out) == 1 else b"".join(out)
                out = []
                yield step
        token = unmark(token)  # (no step came)
        total_prompt = sum(num_prompt_tokens)
        total_completion = sum(previous_num_tokens)
        details = serving.enable_prompt_tokens_details and num_cached_tokens is not None
        if include_usage:
            metrics = names.build_spec_decoding_metrics(last_res) \
                if num_prompts == 1 and n == 1 else None
            if metrics is None:
                yield stamped.usage(total_prompt, total_completion,
                                    num_cached_tokens if details else None)
            else:
                yield fallback.final_usage(ctx, False, serving, request_id, model_name,
                                           created, total_prompt, total_completion,
                                           num_cached_tokens if details else None, metrics)
        usage_info = names.UsageInfo(
            prompt_tokens=total_prompt, completion_tokens=total_completion,
            total_tokens=total_prompt + total_completion)
        if details:
            usage_info.prompt_tokens_details = names.PromptTokenUsageInfo(
                cached_tokens=num_cached_tokens)
        request_metadata.final_usage_info = usage_info
    except generation_error as e:
        token = unmark(token)
        if out:  # (vLLM's generator wrote the step's chunks before the one that raised)
            yield b"".join(out)
        yield f"data: {serving._convert_generation_error_to_streaming_response(e)}\n\n".encode()
    except Exception as e:
        token = unmark(token)
        log.exception("Error in completion stream generator.")
        if out:
            yield b"".join(out)
        yield f"data: {serving.create_streaming_error_response(e)}\n\n".encode()
    except BaseException:  # (a cancellation while the first step is awaited)
        unmark(token)
        raise
    yield b"data: [DONE]\n\n"
