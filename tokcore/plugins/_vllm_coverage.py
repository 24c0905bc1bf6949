"""Which requests the vLLM plugin writes itself, decided per request before the first byte
(every other one gets vLLM's own generator, called as it is).

Chat Completions: covered when the server has no parser (``parser_cls is None``) or one the
plugin covers (``parser_covered``: a reasoning parser ``deepseek_r1``, ``deepseek_v3`` or
``qwen3``, a tool parser ``hermes`` or ``llama3_json`` with
``--enable-auto-tool-choice``, or one of each; its deltas are vLLM's parser's own, called as
vLLM's generator calls it, any ``tool_choice``, and the request needs a tokenizer), and does
not log outputs
(``--enable-log-outputs``), the serving object is vLLM's own class (not a subclass), the
request asks no ``return_prompt_text`` (nor, on 0.33 on, ``return_weight_versions``), its
``echo`` (if any) echoes nothing (the last message's role is not the answer's, or its
content is empty), and, when it asks for usage (``stream_options.include_usage`` or
``--enable-force-include-usage``), the server has neither ``--enable-prompt-tokens-details``
nor per-request metrics. Any ``n``;
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

__all__ = ["chat_covered", "completion_covered", "last_message", "parser_covered"]

#: what the class ``ParserManager._compose_parser`` makes for a reasoning parser alone holds
#: (beyond the names every class has)
_COMPOSED = frozenset({"reasoning_parser_cls", "tool_parser_cls", "tool_strict_level",
                       "_abc_impl"})


def last_message(conversation: Any, role: str) -> Any:
    """What vLLM's chat generator echoes (its own expression)."""
    if conversation and "content" in conversation[-1] and conversation[-1].get("role") == role:
        return conversation[-1]["content"] or ""
    return ""


def parser_covered(ctx: Context, parser_cls: Any) -> bool:
    """Whether a server's parser class is one the plugin writes the deltas of: the class
    vLLM composes (a ``DelegatingParser`` subclass that only names its parsers) around
    ``deepseek_r1``'s, ``deepseek_v3``'s or ``qwen3``'s reasoning parser, ``hermes``'s or
    ``llama3_json``'s tool parser (0.32 and 0.33: the legacy class; 0.34's engine parser's
    adapter), or one of each."""
    names = ctx.names
    if not isinstance(parser_cls, type) or parser_cls.__bases__ != (names.DelegatingParser,):
        return False
    held = vars(parser_cls)
    if any(not (key.startswith("__") or key in _COMPOSED) for key in held):
        return False
    reasoning = held.get("reasoning_parser_cls")
    tool = held.get("tool_parser_cls")
    if reasoning is None and tool is None:
        return False
    return (reasoning is None or
            reasoning is names.DeepSeekR1ReasoningParser or
            reasoning is names.DeepSeekV3ReasoningParser or
            reasoning is vars(names.Qwen3Parser).get("reasoning_parser_cls")) and \
        (tool is None or tool is names.Hermes2ProToolParser or
         (isinstance(tool, type) and (tool is names.Llama3JsonToolParser or
                                      tool is names.LlamaJsonEngineToolParser)))


def chat_covered(ctx: Context, serving: Any, request: Any, request_id: Any, model_name: Any,
                 conversation: Any, tokenizer: Any) -> bool:
    """Whether the plugin writes this chat request's stream (the module's docstring)."""
    parser_cls = serving.parser_cls if type(serving) is ctx.names.OpenAIServingChat else None
    if type(serving) is not ctx.names.OpenAIServingChat or (
            serving._include_reasoning_tokens_details if parser_cls is None else
            (tokenizer is None or not parser_covered(ctx, parser_cls))) or \
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
