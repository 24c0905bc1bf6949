"""The steps of a covered stream that the vLLM plugin leaves to vLLM's own models, built and
dumped as the release's generator builds and dumps them: a logprobs position the writer has
no frame for (none, no sampled entry, no decoded text: not seen from vLLM's engine), a finish
chunk that carries ``kv_transfer_params`` (0.33 on: a disaggregated prefill's), a parser's
delta that is neither one text of one kind nor one tool call's piece (reasoning and content
in one step, several tool calls or text beside one, a call's first piece on the finish
chunk, a member set to None), and the final usage chunk with speculative decoding metrics."""

from __future__ import annotations

from typing import Any

from ._vllm_processor import vllms
from ._vllm_shapes import Context

__all__ = ["chat_step", "completion_step", "final_usage"]


def chat_step(ctx: Context, serving: Any, request: Any, tokenizer: Any, output: Any,
              ids: list[int] | None, usage: Any, finish: str | None, include_usage: bool,
              request_id: str, model_name: str, created: int, kv_transfer_params: Any,
              empty: bool, delta: Any = None, hide: bool = False) -> bytes:
    """A chat step (``empty``: a first output that is empty and finishes, 0.33 on;
    ``delta``: a reasoning parser's delta, as it returned it; ``hide``: its request hides
    the reasoning, so no logprobs; ``usage``: its last count, of three or more, the reasoning
    tokens)."""
    n, rules = ctx.names, ctx.release.rules
    logprobs = serving._create_chat_logprobs(
        token_ids=output.token_ids,
        top_logprobs=vllms(output.logprobs, n.append_logprobs_for_next_position),
        tokenizer=tokenizer, num_output_top_logprobs=request.top_logprobs,
        logprob_token_ids=request.logprob_token_ids,
        return_as_token_id=request.return_tokens_as_token_ids) \
        if request.logprobs and not hide else None
    if delta is None:
        delta = n.DeltaMessage() if empty else n.DeltaMessage(content=output.text)
    if finish is None:
        choice = n.ChatCompletionResponseStreamChoice(
            index=output.index, delta=delta, logprobs=logprobs, finish_reason=None,
            token_ids=ids)
    else:
        choice = n.ChatCompletionResponseStreamChoice(
            index=output.index, delta=delta, logprobs=logprobs, finish_reason=finish,
            stop_reason=output.stop_reason, token_ids=ids,
            **({"weight_versions": None} if rules.weight_versions else {}))
    if not rules.chat_step_processor:  # (0.32 filters the choice; 0.33 on, the step's delta)
        choice = n.maybe_filter_parallel_tool_calls(choice, request)
    chunk = n.ChatCompletionStreamResponse(
        id=request_id, object="chat.completion.chunk", created=created, choices=[choice],
        model=model_name, **({"kv_transfer_params": kv_transfer_params if finish else None}
                             if rules.kv_transfer_params else {}))
    if not include_usage and serving.system_fingerprint is not None and finish is not None:
        chunk.system_fingerprint = serving.system_fingerprint
    if usage is not None:
        chunk.usage = n.UsageInfo(
            prompt_tokens=usage[0], completion_tokens=usage[1],
            total_tokens=usage[0] + usage[1], completion_tokens_details=None
            if len(usage) < 3 else n.make_completion_tokens_details(usage[-1]))
    return f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n".encode()


def completion_step(ctx: Context, serving: Any, request: Any, tokenizer: Any, output: Any,
                    delta_ids: Any, i: int, text: str, ids: list[int] | None,
                    prompt_ids: Any, usage: tuple[int, int] | None, include_usage: bool,
                    next_offsets: list[int], request_id: str, model_name: str, created: int,
                    kv_transfer_params: Any) -> bytes:
    """A completion step (its logprobs by vLLM's own function: the text offset moves)."""
    n, rules = ctx.names, ctx.release.rules
    logprobs = None
    if request.logprobs is not None:
        logprobs = serving._create_completion_logprobs(
            token_ids=delta_ids,
            top_logprobs=vllms(output.logprobs, n.append_logprobs_for_next_position),
            num_output_top_logprobs=request.logprobs, tokenizer=tokenizer,
            logprob_token_ids=request.logprob_token_ids, initial_text_offset=next_offsets[i],
            return_as_token_id=request.return_tokens_as_token_ids)
        if logprobs.tokens:
            next_offsets[i] = logprobs.text_offset[-1] + len(logprobs.tokens[-1])
    finish = output.finish_reason
    chunk = n.CompletionStreamResponse(
        id=request_id, object="text_completion", created=created, model=model_name,
        choices=[n.CompletionResponseStreamChoice(
            index=i, text=text, logprobs=logprobs, finish_reason=finish,
            stop_reason=output.stop_reason, prompt_token_ids=prompt_ids, token_ids=ids,
            **({"weight_versions": None} if rules.weight_versions else {}))],
        **({"kv_transfer_params": kv_transfer_params if finish is not None else None}
           if rules.kv_transfer_params else {}))
    if not include_usage and serving.system_fingerprint is not None and finish is not None:
        chunk.system_fingerprint = serving.system_fingerprint
    if usage is not None:
        chunk.usage = n.UsageInfo(prompt_tokens=usage[0], completion_tokens=usage[1],
                                  total_tokens=usage[0] + usage[1])
    return f"data: {chunk.model_dump_json(exclude_unset=True)}\n\n".encode()


def final_usage(ctx: Context, chat: bool, serving: Any, request_id: str, model_name: str,
                created: int, prompt: int, completion: int, cached: int | None,
                metrics: Any, reasoning: int | None = None) -> bytes:
    """The final usage chunk with speculative decoding metrics (``reasoning``: the reasoning
    tokens of a chat stream with a reasoning parser)."""
    n = ctx.names
    usage = n.UsageInfo(prompt_tokens=prompt, completion_tokens=completion,
                        total_tokens=prompt + completion)
    if reasoning is not None:
        usage.completion_tokens_details = n.make_completion_tokens_details(reasoning)
    if cached is not None:
        usage.prompt_tokens_details = n.PromptTokenUsageInfo(cached_tokens=cached)
    per_request = n.PerRequestMetrics()
    per_request.speculative_decoding = metrics
    cls = n.ChatCompletionStreamResponse if chat else n.CompletionStreamResponse
    chunk = cls(id=request_id, created=created, model=model_name, choices=[], usage=usage,
                system_fingerprint=serving.system_fingerprint, metrics=per_request)
    return f"data: {chunk.model_dump_json(exclude_none=True, exclude_unset=chat)}\n\n" \
        .encode()
