"""vLLM's names, imported in one place: the plugin's other modules use what :func:`load`
gives and never import vLLM themselves (a test checks it).

:func:`resolve` finds a target of the registry (``_vllm_targets``) by its module and
qualified name; :func:`load` gives the names the plugin's code calls and builds with, as the
modules of vLLM's generators hold them (a class monkeypatched there is the one used).
"""

from __future__ import annotations

import importlib
from typing import Any, NamedTuple

from ._vllm_targets import (
    BASE,
    BASE_PROTOCOL,
    CHAT,
    CHAT_PROTOCOL,
    CHAT_STEP,
    COMPLETION,
    DEEPSEEK_R1,
    DEEPSEEK_V3,
    DETOKENIZER,
    ENGINE_LOGPROBS,
    EXCEPTIONS,
    HERMES,
    LLAMA3_JSON,
    LLAMA3_JSON_ENGINE,
    PARSER,
    QWEN3,
    TOOL_CALLS,
)

__all__ = ["ABSENT", "Names", "load", "resolve", "version"]

#: what :func:`resolve` gives for a target this vLLM has not
ABSENT = "absent"


def resolve(name: str) -> Any:
    """The target ``module:qualified.name`` as its module or class holds it (a method as
    the class's own attribute: a classmethod object, not the bound method); ``ABSENT``
    where the module or an attribute is missing. A module that fails to import for another
    reason raises that error."""
    module_name, _, qualname = name.partition(":")
    try:
        found: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as error:
        if error.name is not None and module_name.startswith(error.name):
            return ABSENT  # (the module is not in this vLLM)
        raise
    for part in qualname.split("."):
        attributes = vars(found) if isinstance(found, type) else None
        if attributes is not None and part in attributes:
            found = attributes[part]
        elif hasattr(found, part):
            found = getattr(found, part)
        else:
            return ABSENT
    return found


def version() -> str:
    """The running vLLM's ``__version__`` (``?`` where it does not import)."""
    try:
        return str(importlib.import_module("vllm").__version__)
    except Exception:  # (a vLLM that does not import is named as one)
        return "?"


class Names(NamedTuple):
    """What the plugin's code calls, reads and builds, from this vLLM."""

    chat_serving: Any  # the chat serving module (its models are the ones it builds)
    completion_serving: Any  # the completion serving module
    OpenAIServingChat: Any
    OpenAIServingCompletion: Any
    LogprobsProcessor: Any
    GenerationError: type[BaseException]
    should_include_usage: Any
    build_spec_decoding_metrics: Any
    append_logprobs_for_next_position: Any
    convert_ids_list_to_tokens: Any
    make_prompt_tokens_details: Any
    make_completion_tokens_details: Any
    maybe_filter_parallel_tool_calls: Any
    # the reasoning parsers' (a chat step's delta is the parser's, called as vLLM calls it)
    ChatStreamProcessor: Any  # (0.33 on; ABSENT on 0.32)
    ChatCompletionNamedToolChoiceParam: Any
    DelegatingParser: Any
    DeepSeekR1ReasoningParser: Any
    DeepSeekV3ReasoningParser: Any
    Qwen3Parser: Any
    # the tool parsers' (the same parser objects; their tool-call deltas' models)
    Hermes2ProToolParser: Any
    Llama3JsonToolParser: Any  # (ABSENT on 0.34: an engine parser there)
    LlamaJsonEngineToolParser: Any  # (0.34 on; ABSENT before)
    DeltaToolCall: Any
    DeltaFunctionCall: Any
    # the chunk models, as the generators' modules name them
    ChatCompletionStreamResponse: Any
    ChatCompletionResponseStreamChoice: Any
    ChatCompletionLogProbs: Any
    ChatCompletionLogProbsContent: Any
    ChatCompletionLogProb: Any
    DeltaMessage: Any
    CompletionStreamResponse: Any
    CompletionResponseStreamChoice: Any
    CompletionLogProbs: Any
    UsageInfo: Any
    PromptTokenUsageInfo: Any
    CompletionTokenUsageInfo: Any
    PerRequestMetrics: Any


def load() -> Names:
    """This vLLM's names (ImportError or AttributeError: not a layout the plugin knows)."""
    chat = importlib.import_module(CHAT)
    completion = importlib.import_module(COMPLETION)
    base = importlib.import_module(BASE)
    logprobs = importlib.import_module(ENGINE_LOGPROBS)
    return Names(
        chat_serving=chat, completion_serving=completion,
        OpenAIServingChat=chat.OpenAIServingChat,
        OpenAIServingCompletion=completion.OpenAIServingCompletion,
        LogprobsProcessor=logprobs.LogprobsProcessor,
        GenerationError=importlib.import_module(EXCEPTIONS).GenerationError,
        should_include_usage=chat.should_include_usage,
        build_spec_decoding_metrics=base.build_spec_decoding_metrics,
        append_logprobs_for_next_position=logprobs.append_logprobs_for_next_position,
        convert_ids_list_to_tokens=importlib.import_module(
            DETOKENIZER).convert_ids_list_to_tokens,
        make_prompt_tokens_details=chat._make_prompt_tokens_details,
        make_completion_tokens_details=chat._make_completion_tokens_details,
        maybe_filter_parallel_tool_calls=importlib.import_module(
            TOOL_CALLS).maybe_filter_parallel_tool_calls,
        ChatStreamProcessor=resolve(f"{CHAT_STEP}:ChatStreamProcessor"),
        ChatCompletionNamedToolChoiceParam=importlib.import_module(
            CHAT_PROTOCOL).ChatCompletionNamedToolChoiceParam,
        DelegatingParser=importlib.import_module(PARSER).DelegatingParser,
        DeepSeekR1ReasoningParser=importlib.import_module(DEEPSEEK_R1).DeepSeekR1ReasoningParser,
        DeepSeekV3ReasoningParser=importlib.import_module(DEEPSEEK_V3).DeepSeekV3ReasoningParser,
        Qwen3Parser=importlib.import_module(QWEN3).Qwen3Parser,
        Hermes2ProToolParser=importlib.import_module(HERMES).Hermes2ProToolParser,
        Llama3JsonToolParser=resolve(f"{LLAMA3_JSON}:Llama3JsonToolParser"),
        LlamaJsonEngineToolParser=resolve(f"{LLAMA3_JSON_ENGINE}:LlamaJsonEngineToolParser"),
        DeltaToolCall=importlib.import_module(BASE_PROTOCOL).DeltaToolCall,
        DeltaFunctionCall=importlib.import_module(BASE_PROTOCOL).DeltaFunctionCall,
        ChatCompletionStreamResponse=chat.ChatCompletionStreamResponse,
        ChatCompletionResponseStreamChoice=chat.ChatCompletionResponseStreamChoice,
        ChatCompletionLogProbs=chat.ChatCompletionLogProbs,
        ChatCompletionLogProbsContent=chat.ChatCompletionLogProbsContent,
        ChatCompletionLogProb=chat.ChatCompletionLogProb,
        DeltaMessage=chat.DeltaMessage,
        CompletionStreamResponse=completion.CompletionStreamResponse,
        CompletionResponseStreamChoice=completion.CompletionResponseStreamChoice,
        CompletionLogProbs=completion.CompletionLogProbs,
        UsageInfo=chat.UsageInfo,
        PromptTokenUsageInfo=completion.PromptTokenUsageInfo,
        CompletionTokenUsageInfo=chat.CompletionTokenUsageInfo,
        PerRequestMetrics=chat.PerRequestMetrics)
