"""The chat stream of a covered request (``_vllm_coverage``), written by the stream writer
straight from the engine's ``RequestOutput`` s: vLLM 0.32's
``chat_completion_stream_generator``, and 0.33's and 0.34's ``chat_completion_stream_generator``
(the wrapper that dumps) and ``chat_completion_stream_generator_raw`` (what it dumps, a step's
delta by ``ChatStreamProcessor.step``) together, without a parser. What differs between the
releases is the context's ``Rules`` (``_vllm_releases``) and its shapes (``_vllm_shapes``)."""

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


async def stream(ctx: Context, serving: Any, request: Any,
                 result_generator: AsyncIterator[Any], request_id: str, model_name: str,
                 tokenizer: Any, request_metadata: Any) -> AsyncGenerator[bytes, None]:
    """The stream's bytes, vLLM's own but for ``created`` (the clock's)."""
    names, rules = ctx.names, ctx.release.rules
    created = int(time.time())
    n = 1 if request.n is None else request.n
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
    bare = not want_logprobs and not return_ids and not continuous
    generation_error = names.GenerationError
    last_res = None
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
                        logprobs = chat_logprobs(token_ids, output.logprobs, top, every, as_ids)
                    except Odd:
                        odd = True
                text = output.text
                empty = False
                if not text and not token_ids and not previous_num_tokens[i]:
                    if finish is None or not empty_finish:
                        continue
                    empty = True  # (0.33 on: the finish of an empty output, "delta":{})
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
        if include_usage:
            metrics = names.build_spec_decoding_metrics(last_res) if n == 1 else None
            if metrics is None:
                yield stamped.usage(num_prompt_tokens, completion_tokens)
            else:
                yield fallback.final_usage(ctx, True, serving, request_id, model_name, created,
                                           num_prompt_tokens, completion_tokens, None, metrics)
        request_metadata.final_usage_info = names.UsageInfo(
            prompt_tokens=num_prompt_tokens, completion_tokens=completion_tokens,
            total_tokens=num_prompt_tokens + completion_tokens, completion_tokens_details=None)
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
