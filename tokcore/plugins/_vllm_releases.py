"""The vLLM releases the plugin knows: for each, the fingerprint of every target of the
registry (``_vllm_targets``) and the few rules in which its chunks differ from another's.

A release is known when every target's source digest (and pydantic-core's release, whose
bytes vLLM's chunks are) is one row's here: :func:`detect` gives that row, or the closest
row and the targets that differ from it, which the plugin names in its one log line before it
stays off. A new row comes from ``python tools/vllm_sources.py --table`` run with that
release's Python, once its differences are ported (``Rules``).
"""

from __future__ import annotations

import hashlib
import inspect
from collections.abc import Mapping
from typing import Any, NamedTuple

from ._vllm_names import ABSENT, resolve
from ._vllm_targets import TARGETS, short

__all__ = ["RELEASES", "Release", "Rules", "detect", "digest", "differences", "fingerprint"]

#: the key of pydantic-core's release in a fingerprint
PYDANTIC_CORE = "pydantic-core"


class Rules(NamedTuple):
    """What a release's streams do that another's do not (the plugin's generators and
    shapes read these; everything else is the same in every known release)."""

    #: every chunk the generators' loop builds (not the role, echo or final usage chunk) has
    #: ``"kv_transfer_params"``: null, but on a finish chunk whose engine output carries
    #: them (a disaggregated prefill; that chunk is written by vLLM's models)
    kv_transfer_params: bool
    #: a chat finish choice and every completion choice have ``"weight_versions"``: null
    #: (a request asking ``return_weight_versions`` keeps vLLM's generator)
    weight_versions: bool
    #: a choice whose first output is empty and finishes is written (chat ``"delta":{}``,
    #: completions ``"text":""``), where 0.32 wrote nothing for it
    empty_finish: bool
    #: the chat error chunk is vLLM's ``ErrorResponse`` dumped by pydantic (compact), not
    #: ``json.dumps`` (``create_streaming_error_response``)
    chat_error_model: bool
    #: the completions generator logs outputs (``--enable-log-outputs``: such a server keeps
    #: vLLM's generator, as chat always did)
    completion_logs_outputs: bool
    #: a chat choice's step is ``ChatStreamProcessor.step`` (its parser's delta, its finish
    #: reason), where 0.32's generator calls the parser's ``parse_delta`` itself
    chat_step_processor: bool


class Release(NamedTuple):
    name: str
    rules: Rules
    #: target (its qualified name, ``short``) -> the first 16 hex digits of the sha256 of
    #: its source (``absent``: not in this release); and pydantic-core's release
    digests: Mapping[str, str]


def digest(item: Any) -> str:
    """The first 16 hex digits of the sha256 of an item's source (``absent``; ``no
    source`` where it cannot be read)."""
    if isinstance(item, str) and item == ABSENT:
        return ABSENT
    item = getattr(item, "__func__", item)  # (a classmethod or staticmethod)
    try:
        source = inspect.getsource(item)
    except (OSError, TypeError):
        return "no source"
    return hashlib.sha256(source.encode()).hexdigest()[:16]


def fingerprint(originals: Mapping[str, Any] | None = None) -> dict[str, str]:
    """This vLLM's digests, by target (``originals``: what the plugin replaced, by target
    name: their digests are the originals'), and pydantic-core's release."""
    import pydantic_core

    originals = originals or {}
    found = {short(t.name): digest(originals[t.name] if t.name in originals
                                   else resolve(t.name)) for t in TARGETS}
    found[PYDANTIC_CORE] = str(pydantic_core.__version__)
    return found


def differences(found: Mapping[str, str], expected: Mapping[str, str]) -> list[str]:
    """What differs between two fingerprints: the targets by name (``absent`` where one has
    it and the other not), pydantic-core with both releases."""
    named = []
    for name in [*expected, *(name for name in found if name not in expected)]:
        if found.get(name) != expected.get(name):
            if name == PYDANTIC_CORE:
                named.append(f"{name} {found.get(name)} (checked: {expected.get(name)})")
            elif found.get(name) == ABSENT:
                named.append(f"{name} (absent here)")
            elif expected.get(name) in (ABSENT, None):
                named.append(f"{name} (new here)")
            else:
                named.append(name)
    return named


def detect(found: Mapping[str, str]) -> tuple[Release | None, Release, list[str]]:
    """The known release whose fingerprint this is (None: none is), the closest known one,
    and what differs from that one."""
    best: tuple[int, Release, list[str]] | None = None
    for release in RELEASES.values():
        differ = differences(found, release.digests)
        if not differ:
            return release, release, []
        if best is None or len(differ) < best[0]:
            best = (len(differ), release, differ)
    assert best is not None
    return None, best[1], best[2]


# --- the releases (tools/vllm_sources.py --table)

_A = ABSENT
#: 0.32.0 (the CPU wheel runs the real server here)
_V0_32_0 = {
    "OpenAIServingChat.chat_completion_stream_generator": "413759ad163362db",
    "OpenAIServingChat.chat_completion_stream_generator_raw": _A,
    "OpenAIServingChat.__init__": "36059defbe726c97",
    "OpenAIServingChat._create_chat_logprobs": "cb7b7ad3766cc77c",
    "OpenAIServingChat._get_top_logprobs": "8e27ccc975d21e19",
    "OpenAIServingChat.get_chat_request_role": "fc52e1d75e2c13d2",
    "_make_prompt_tokens_details": "5536ed8fec57e469",
    "_make_completion_tokens_details": "4f67f93456cdfe5d",
    "ChatStreamProcessor.__init__": _A,
    "ChatStreamProcessor.step": _A,
    "keeps_tool_calls": _A,
    "OpenAIServingChat._make_parser": "7d97ffc12087d22f",
    "ParserManager._compose_parser": "5265b7658f1807d6",
    "DelegatingParser": "df0984e45bc8f0fe",
    "BaseThinkingReasoningParser": "f719845d7afa0e61",
    "DeepSeekR1ReasoningParser": "87566abd81f84ad7",
    "DeepSeekV3ReasoningParser": "e079c701811a7763",
    "IdentityReasoningParser": "4ebd3e835f76c3e1",
    "ParserEngineReasoningAdapter": "b50cb4f541c45b14",
    "make_adapters": "512e1d237f8beea5",
    "Qwen3Parser": "8d2ea512527f3ca0",
    "ToolParser": "41dc3ae6da5e4e9f",
    "Hermes2ProToolParser": "056406c91f8cb9e2",
    "Llama3JsonToolParser": "18d33d000906c0d8",
    "LlamaJsonEngineToolParser": _A,
    "ParserEngineToolAdapter": "49eeeddf408e5aa5",
    "LlamaJsonParser": _A,
    "extract_named_tool_call_streaming": "af1e95d446fc2f8b",
    "extract_required_tool_call_streaming": "064185a3afa40834",
    "make_tool_call_id": "4f6dae3d3902e078",
    "maybe_filter_parallel_tool_calls": "41ed6e6cc26e8e6a",
    "resolve_finish_reason": _A,
    "chat_top_logprobs_limit": _A,
    "ChatCompletionNamedToolChoiceParam": "c63986479800dda0",
    "ChatCompletionRequest": "12cfed99cdb069e9",
    "OpenAIServingCompletion.completion_stream_generator": "3f590ecb8478e275",
    "OpenAIServingCompletion.__init__": "321fd18beab5c13e",
    "OpenAIServingCompletion._create_completion_logprobs": "eb44cf0ebb9fc4ab",
    "_delta_frame_template": _A,
    "completion_top_logprobs_limit": _A,
    "CompletionRequest": "1eb0754396b7f3d5",
    "GenerateBaseServing._get_decoded_token": "9479161a7a4b4306",
    "format_token_id_placeholder": "a38f57719b0ed563",
    "GenerateBaseServing._raise_if_error": "a89140fc600bb405",
    "GenerateBaseServing._convert_generation_error_to_streaming_response": "12c7a28cb2a4b091",
    "GenerateBaseServing.create_streaming_error_response": "cd7c8878b08937e3",
    "BaseServing.create_error_response": "e19e42aaa4f62606",
    "create_error_response": "0a60b04b68103828",
    "BaseServing._extract_prompt_text": "1f03c4a1123ce4d1",
    "build_spec_decoding_metrics": "5d851548cd2c681a",
    "should_include_usage": "f6bbdfdd461a2573",
    "as_list": "a5ab68f8e5ac5f64",
    "GenerationError": "9bd154ced522b1d7",
    "LogprobsProcessor.from_new_request": "e8a0bed9a2f36092",
    "LogprobsProcessor._update_sample_logprobs": "acd9081bb7c5ced1",
    "LogprobsProcessor._verify_tokens": "82d902834e525450",
    "LogprobsProcessor._correct_decoded_token": "0cb5150c52815a6e",
    "LogprobsProcessor._get_sampled_context_ids": "36865c348ed2b86d",
    "LogprobsProcessor.update_from_output": "2d4d3c33fc3cc5d2",
    "create_sample_logprobs": "16d8d09571eda064",
    "append_logprobs_for_next_position": "6ed1dc5e4d3069a5",
    "Logprob": "6038ceca03702703",
    "FlatLogprobs": "6d4f1deae83e280b",
    "convert_ids_list_to_tokens": "6d5bec549f3c1e1c",
    "get_leading_space_marker": "c606a0e2220ef241",
    "_restore_leading_spaces": "c006565ed84ba9a8",
    "RequestState._new_completion_output": "dec8c8112ea29602",
    "RequestOutput.add": "2fb578d07eb37857",
    "RequestOutput": "a1e65da28011aa0b",
    "CompletionOutput": "3bafbdd683999e04",
    "ChatCompletionStreamResponse": "72a9ce8581e881f9",
    "ChatCompletionResponseStreamChoice": "700978accd81d50f",
    "ChatCompletionLogProbs": "3ca7a0cefa2977b4",
    "ChatCompletionLogProbsContent": "90669a2a805e5ea4",
    "ChatCompletionLogProb": "611e3bc29d8290e7",
    "DeltaMessage": "c73e1ca313d8b07b",
    "DeltaToolCall": "3f4f722ae1fd741f",
    "DeltaFunctionCall": "66308bc44084d2a6",
    "PerRequestMetrics": "c7ad804e3c7e7957",
    "CompletionStreamResponse": "957686c26407a57c",
    "CompletionResponseStreamChoice": "e2e633212a8c5c35",
    "CompletionLogProbs": "a086ff960d469873",
    "UsageInfo": "b1e70d3756a0a733",
    "PromptTokenUsageInfo": "ea264fb5b7b0ab95",
    "CompletionTokenUsageInfo": "187c5d8fa4526408",
    "OpenAIBaseModel": "fa0f14cbd3fd8c54",
    "ErrorResponse": "f1f4d6edb0702588",
    "ErrorInfo": "1adb0e1768eb3b5d",
    "pydantic-core": "2.50.5",
}
#: 0.33.0: the chat generator split in two (the raw generator, the dump wrapper), a step's work in
#: ChatStreamProcessor; kv_transfer_params and weight_versions on the chunks; an empty
#: first output that finishes written; chat errors by pydantic; completions log outputs
_V0_33_0 = {**_V0_32_0,
    "OpenAIServingChat.chat_completion_stream_generator": "43fd186bf412ffeb",
    "OpenAIServingChat.chat_completion_stream_generator_raw": "f946a97899fce0d9",
    "OpenAIServingChat.__init__": "2e4da2dcbe8fecbf",
    "OpenAIServingChat._get_top_logprobs": "5fc5bfe38f24a632",
    "ChatStreamProcessor.__init__": "65d411e7d1270997",
    "ChatStreamProcessor.step": "d13cbe65e56dc6a2",
    "keeps_tool_calls": "e3aa9bd7328b12a1",
    "ParserManager._compose_parser": "a20559099f8a6efe",
    "ToolParser": "98691d6febeeaa42",
    "DelegatingParser": "d2ccc5bd3c898c40",
    "ParserEngineReasoningAdapter": "960e8761cb01ce88",
    "maybe_filter_parallel_tool_calls": "8f3f0fa01e1ceb32",
    "resolve_finish_reason": "02f4b4c4d35169a4",
    "chat_top_logprobs_limit": "0087b503fb561cc5",
    "ChatCompletionRequest": "18a6e6ce16758337",
    "OpenAIServingCompletion.completion_stream_generator": "8a9a5b2bb2ee6fc9",
    "OpenAIServingCompletion.__init__": "a1c49337c3e59e3e",
    "OpenAIServingCompletion._create_completion_logprobs": "01dee4038e401f37",
    "completion_top_logprobs_limit": "6bfd66921a3dfaca",
    "CompletionRequest": "3e80b0814367fad2",
    "GenerateBaseServing._convert_generation_error_to_streaming_response": "639165345d40b98c",
    "create_error_response": "aaaac15a4762eb45",
    "ChatCompletionStreamResponse": "6a857d40d48b6472",
    "ChatCompletionResponseStreamChoice": "1191d276bd762be1",
    "CompletionStreamResponse": "bd8410bde15f3da4",
    "CompletionResponseStreamChoice": "d26764813e8cf595",
}
#: 0.34.0: plain completion deltas from vLLM's own template (the same bytes); the chat role
#: chunk's continuous usage gains prompt_tokens_details (not where the plugin writes the
#: stream: it keeps vLLM's generator for prompt details with usage); UsageInfo leaves a
#: None prompt_tokens_details out
_V0_34_0 = {**_V0_33_0,
    "OpenAIServingChat.chat_completion_stream_generator_raw": "46adfbf1a8465c8d",
    "ChatCompletionRequest": "58025009579b2cd2",
    "OpenAIServingCompletion.completion_stream_generator": "ae7a34e4d73a7805",
    "_delta_frame_template": "fd9d6b33ad73dbe0",
    "DelegatingParser": "f6d11ca391880f2e",
    "BaseThinkingReasoningParser": "5cbe6d0e85e8ec3c",
    "ParserEngineReasoningAdapter": "802246870261e8ed",
    "Qwen3Parser": "0840b82872f367de",
    "Llama3JsonToolParser": _A,
    "LlamaJsonEngineToolParser": "1a2d3b8cc1420bd8",
    "LlamaJsonParser": "e5a4f731c551468e",
    "extract_required_tool_call_streaming": "9c9145294e527423",
    "LogprobsProcessor.from_new_request": "f8d6ad2b8e4dccc4",
    "UsageInfo": "1fddd5cf2558444d",
}
RELEASES: dict[str, Release] = {
    "0.32.0": Release("0.32.0", Rules(
        kv_transfer_params=False, weight_versions=False, empty_finish=False,
        chat_error_model=False, completion_logs_outputs=False,
        chat_step_processor=False), _V0_32_0),
    "0.33.0": Release("0.33.0", Rules(
        kv_transfer_params=True, weight_versions=True, empty_finish=True,
        chat_error_model=True, completion_logs_outputs=True,
        chat_step_processor=True), _V0_33_0),
    "0.34.0": Release("0.34.0", Rules(
        kv_transfer_params=True, weight_versions=True, empty_finish=True,
        chat_error_model=True, completion_logs_outputs=True,
        chat_step_processor=True), _V0_34_0),
}
