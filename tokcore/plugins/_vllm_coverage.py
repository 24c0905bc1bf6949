"""Which requests the vLLM plugin writes itself, decided per request before the first byte
(every other one gets vLLM's own generator, called as it is).

Chat Completions: covered when the server has no tool or reasoning parser
(``parser_cls is None``) and does not log outputs (``--enable-log-outputs``), the serving
object is vLLM's own class (not a subclass), the request asks no ``return_prompt_text`` (nor,
on 0.33 on, ``return_weight_versions``), its ``echo`` (if any) echoes nothing (the last
message's role is not the answer's, or its content is empty), and, when it asks for usage
(``stream_options.include_usage`` or ``--enable-force-include-usage``), the server has
neither ``--enable-prompt-tokens-details`` nor per-request metrics. Any ``n``;
``stream_options`` (usage, continuous usage); ``return_token_ids``; ``logprobs`` with any
``top_logprobs`` (-1 too), ``logprob_token_ids``, ``return_tokens_as_token_ids`` (the
request's or the server's); stop strings and token ids; the ``system_fingerprint`` where vLLM
puts it.

Completions: covered when the serving object is vLLM's own class, the request does not ask
``echo`` with ``logprobs`` (the echoed prompt's first token has a null logprob) nor, on 0.33
on, ``return_weight_versions``, the server does not log outputs (0.33 on: completions log
them too), and, when usage is asked, the server has no per-request metrics. Any ``n``,
several prompts, ``echo`` (without logprobs; ``max_tokens=0`` too), ``stream_options``,
``return_token_ids``, ``logprobs`` (0 to -1, ``logprob_token_ids``,
``return_tokens_as_token_ids``, the text offsets), ``--enable-prompt-tokens-details`` (the
cached tokens on the usage chunk).
"""

from __future__ import annotations

from typing import Any

from ._vllm_shapes import Context

__all__ = ["chat_covered", "completion_covered", "last_message"]


def last_message(conversation: Any, role: str) -> Any:
    """What vLLM's chat generator echoes (its own expression)."""
    if conversation and "content" in conversation[-1] and conversation[-1].get("role") == role:
        return conversation[-1]["content"] or ""
    return ""


def chat_covered(ctx: Context, serving: Any, request: Any, request_id: Any, model_name: Any,
                 conversation: Any, tokenizer: Any) -> bool:
    """Whether the plugin writes this chat request's stream (the module's docstring)."""
    if type(serving) is not ctx.names.OpenAIServingChat or \
            serving.parser_cls is not None or serving._include_reasoning_tokens_details or \
            (serving.enable_log_outputs and serving.request_logger) or \
            request.return_prompt_text or type(request_id) is not str or \
            type(model_name) is not str or \
            (ctx.release.rules.weight_versions and request.return_weight_versions):
        return False
    role = serving.get_chat_request_role(request)
    if type(role) is not str or (request.echo and last_message(conversation, role)):
        return False
    include_usage, _ = ctx.names.should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    if include_usage and (serving.enable_prompt_tokens_details or
                          serving.enable_per_request_metrics):
        return False
    return not (request.logprobs and tokenizer is None)


def completion_covered(ctx: Context, serving: Any, request: Any, request_id: Any,
                       model_name: Any, created: Any, tokenizer: Any) -> bool:
    """Whether the plugin writes this completion request's stream (the module's
    docstring)."""
    rules = ctx.release.rules
    if type(serving) is not ctx.names.OpenAIServingCompletion or \
            (request.echo and request.logprobs is not None) or type(request_id) is not str or \
            type(model_name) is not str or type(created) is not int or \
            (rules.weight_versions and request.return_weight_versions) or \
            (rules.completion_logs_outputs and serving.enable_log_outputs and
             serving.request_logger):
        return False
    include_usage, _ = ctx.names.should_include_usage(
        request.stream_options, serving.enable_force_include_usage)
    if include_usage and serving.enable_per_request_metrics:
        return False
    return not (request.logprobs is not None and tokenizer is None)
