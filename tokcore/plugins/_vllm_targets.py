"""Every vLLM name the vLLM plugin replaces, wraps, reproduces, calls or writes the models of:
the one registry (modelled on vllm-ascend's ``vllm_ascend/patch/__init__.py``).

``PATCHES`` are what the plugin sets on vLLM (the only three attributes it changes), each with
why, how, which vLLM code the plugin's own code stands in for, and what change upstream
would retire it. ``TARGETS`` are every vLLM function, method or class whose source the plugin
depends on, with its role: the fingerprint of a release is the sha256 of each one's source
(``_vllm_releases``), so that a vLLM whose code moved is told by name. A target a release has
not is ``absent`` there. Nothing here imports vLLM: a target is named by its module and its
qualified name, and ``_vllm_names.resolve`` finds it.

To port the plugin to a new vLLM: ``python tools/vllm_sources.py`` with that vLLM's Python
writes each target's source to a folder per release (``build/vllm-sources/<release>``), so
that ``diff -ru`` between two releases shows exactly the code that moved; the plugin's code
follows, then a new row of ``_vllm_releases.RELEASES`` (``--table`` prints it).
"""

from __future__ import annotations

from typing import Literal, NamedTuple

__all__ = ["PATCHES", "TARGETS", "Patch", "Target", "short"]

#: the modules the targets live in, by a short name
CHAT = "vllm.entrypoints.openai.chat_completion.serving"
CHAT_PROTOCOL = "vllm.entrypoints.openai.chat_completion.protocol"
CHAT_STEP = "vllm.entrypoints.openai.chat_completion.stream_processor"
MESSAGES = "vllm.entrypoints.openai.chat_completion.message_assembly"
COMPLETION = "vllm.entrypoints.openai.completion.serving"
COMPLETION_PROTOCOL = "vllm.entrypoints.openai.completion.protocol"
BASE = "vllm.entrypoints.generate.base.serving"
BASE_PROTOCOL = "vllm.entrypoints.generate.base.protocol"
ENGINE = "vllm.entrypoints.serve.engine.serving"
ENGINE_PROTOCOL = "vllm.entrypoints.serve.engine.protocol"
API_UTILS = "vllm.entrypoints.serve.utils.api_utils"
TOOL_CALLS = "vllm.entrypoints.serve.utils.tool_calls_utils"
ERRORS = "vllm.entrypoints.serve.exception_handling.error_response"
EXCEPTIONS = "vllm.exceptions"
DETOKENIZER = "vllm.tokenizers.detokenizer_utils"
ENGINE_LOGPROBS = "vllm.v1.engine.logprobs"
LOGPROBS = "vllm.logprobs"
OUTPUT_PROCESSOR = "vllm.v1.engine.output_processor"
OUTPUTS = "vllm.outputs"
COLLECTIONS = "vllm.utils.collection_utils"
PARSER = "vllm.parser.abstract_parser"
PARSER_MANAGER = "vllm.parser.parser_manager"
PARSER_ADAPTERS = "vllm.parser.engine.adapters"
REASONING_BASIC = "vllm.reasoning.basic_parsers"
DEEPSEEK_R1 = "vllm.reasoning.deepseek_r1_reasoning_parser"
DEEPSEEK_V3 = "vllm.reasoning.deepseek_v3_reasoning_parser"
IDENTITY = "vllm.reasoning.identity_reasoning_parser"
QWEN3 = "vllm.parser.qwen3"
TOOL_PARSER = "vllm.tool_parsers.abstract_tool_parser"
HERMES = "vllm.tool_parsers.hermes_tool_parser"
LLAMA3_JSON = "vllm.tool_parsers.llama_tool_parser"
LLAMA3_JSON_ENGINE = "vllm.tool_parsers.llama_json_engine_tool_parser"
LLAMA_JSON = "vllm.parser.llama_json"
TOOL_STREAMING = "vllm.tool_parsers.streaming"
CHAT_UTILS = "vllm.renderers.chat_utils"

Role = Literal["replaced", "wrapped", "reproduced", "called", "model"]


class Target(NamedTuple):
    """A vLLM name whose source the plugin depends on."""

    #: ``module:qualified.name``
    name: str
    #: replaced or wrapped (a ``PATCHES`` target); reproduced (the plugin's code does what
    #: it does, byte for byte); called (the plugin calls it, or reads what it makes, as it
    #: is); model (the plugin writes the bytes pydantic writes of it)
    role: Role
    #: what the plugin relies on it for
    why: str


class Patch(NamedTuple):
    """An attribute the plugin sets on vLLM."""

    target: str
    kind: Literal["replace", "wrap"]
    why: str
    how: str
    #: the targets whose code the plugin's code stands in for (what a port diffs)
    reproduces: tuple[str, ...]
    #: the upstream change that would make the patch unneeded
    retire: str


def short(name: str) -> str:
    """A target's qualified name, the name a refusal writes."""
    return name.partition(":")[2]


_CHAT_GEN = f"{CHAT}:OpenAIServingChat.chat_completion_stream_generator"
_CHAT_RAW = f"{CHAT}:OpenAIServingChat.chat_completion_stream_generator_raw"
_COMPLETION_GEN = f"{COMPLETION}:OpenAIServingCompletion.completion_stream_generator"
_NEW_REQUEST = f"{ENGINE_LOGPROBS}:LogprobsProcessor.from_new_request"

_MODEL = "the plugin's writer shapes are built from it and write its bytes"

TARGETS: tuple[Target, ...] = (
    # --- Chat Completions
    Target(_CHAT_GEN, "replaced", "the chat stream (0.32: the whole generator; 0.33 on: "
           "the wrapper that dumps what the raw generator yields)"),
    Target(_CHAT_RAW, "reproduced", "0.33 on: the chat chunks, built per step"),
    Target(f"{CHAT}:OpenAIServingChat.__init__", "called",
           "the server options the coverage and the generator read"),
    Target(f"{CHAT}:OpenAIServingChat._create_chat_logprobs", "reproduced",
           "a step's chat logprobs (the plugin's, and vLLM's for the steps its models write)"),
    Target(f"{CHAT}:OpenAIServingChat._get_top_logprobs", "reproduced",
           "which top logprobs a chat position writes"),
    Target(f"{CHAT}:OpenAIServingChat.get_chat_request_role", "called", "the role chunk's role"),
    Target(f"{CHAT}:_make_prompt_tokens_details", "called",
           "the final usage's prompt details (none where the plugin writes the stream)"),
    Target(f"{CHAT}:_make_completion_tokens_details", "called",
           "a usage's completion details (none without a reasoning parser)"),
    Target(f"{CHAT_STEP}:ChatStreamProcessor.__init__", "reproduced",
           "0.33 on: a choice's step state (reproduced without a parser; made as vLLM "
           "makes it with a reasoning parser)"),
    Target(f"{CHAT_STEP}:ChatStreamProcessor.step", "reproduced",
           "0.33 on: a step's delta (content, or {} for an empty first output that "
           "finishes) and finish reason (reproduced without a parser; called with one)"),
    Target(f"{MESSAGES}:keeps_tool_calls", "reproduced",
           "0.33 on: called per choice (no effect without a tool parser)"),
    # --- Chat Completions with a reasoning parser (vLLM's parser objects, called as its
    # generator calls them; the plugin writes the deltas they return)
    Target(f"{CHAT}:OpenAIServingChat._make_parser", "called",
           "a choice's parser, made as vLLM's generator makes it"),
    Target(f"{PARSER_MANAGER}:ParserManager._compose_parser", "called",
           "a server's parser class: a DelegatingParser subclass naming its reasoning and "
           "tool parser classes (what the coverage reads)"),
    Target(f"{PARSER}:DelegatingParser", "called",
           "parse_delta per step, count_reasoning_tokens for the usage's reasoning tokens"),
    Target(f"{REASONING_BASIC}:BaseThinkingReasoningParser", "called",
           "deepseek_r1's base: the <think> markers' streaming rules"),
    Target(f"{DEEPSEEK_R1}:DeepSeekR1ReasoningParser", "called",
           "the deepseek_r1 reasoning parser (covered)"),
    Target(f"{DEEPSEEK_V3}:DeepSeekV3ReasoningParser", "called",
           "the deepseek_v3 reasoning parser (covered): deepseek_r1's with the request's "
           "thinking, else the identity parser"),
    Target(f"{IDENTITY}:IdentityReasoningParser", "called",
           "deepseek_v3's without thinking: every step content"),
    Target(f"{PARSER_ADAPTERS}:ParserEngineReasoningAdapter", "called",
           "the qwen3 reasoning parser's class (made by make_adapters)"),
    Target(f"{PARSER_ADAPTERS}:make_adapters", "called",
           "makes the engine parsers' reasoning classes (qwen3's: Qwen3Parser's "
           "reasoning_parser_cls)"),
    Target(f"{QWEN3}:Qwen3Parser", "called", "the qwen3 reasoning parser's engine (covered)"),
    # --- Chat Completions with a tool parser (--enable-auto-tool-choice): the same parser
    # objects, whose tool-call deltas the plugin writes (tool_choice auto, required, named)
    Target(f"{TOOL_PARSER}:ToolParser", "called",
           "the tool parsers' base: their streaming state, the unstreamed arguments"),
    Target(f"{HERMES}:Hermes2ProToolParser", "called",
           "the hermes tool parser (covered): content, then <tool_call> JSON as a call's "
           "name and argument fragments"),
    Target(f"{LLAMA3_JSON}:Llama3JsonToolParser", "called",
           "the llama3_json tool parser of 0.32 and 0.33 (covered)"),
    Target(f"{LLAMA3_JSON_ENGINE}:LlamaJsonEngineToolParser", "called",
           "0.34 on: the llama3_json tool parser, an engine parser's adapter (covered)"),
    Target(f"{PARSER_ADAPTERS}:ParserEngineToolAdapter", "called",
           "0.34's llama3_json tool parser's base (made by make_adapters)"),
    Target(f"{LLAMA_JSON}:LlamaJsonParser", "called",
           "0.34 on: the llama3_json tool parser's engine"),
    Target(f"{TOOL_STREAMING}:extract_named_tool_call_streaming", "called",
           "a named tool_choice's deltas (the parser calls it)"),
    Target(f"{TOOL_STREAMING}:extract_required_tool_call_streaming", "called",
           "tool_choice required's deltas (the parser calls it)"),
    Target(f"{CHAT_UTILS}:make_tool_call_id", "called", "a tool call's id"),
    Target(f"{TOOL_CALLS}:maybe_filter_parallel_tool_calls", "reproduced",
           "parallel_tool_calls false: a delta's calls but the first dropped (0.32: the "
           "plugin calls it on the delta before writing it; 0.33 on: the step does)"),
    Target(f"{TOOL_CALLS}:resolve_finish_reason", "reproduced",
           "0.33 on: the chat finish reason (the engine's, or stop)"),
    Target(f"{BASE}:chat_top_logprobs_limit", "reproduced",
           "0.33 on: how many top logprobs a chat position writes"),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionNamedToolChoiceParam", "called",
           "0.32: a named tool_choice keeps the stop finish reason of a choice with tool "
           "calls"),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionRequest", "called",
           "the request's members the plugin reads, their defaults and meaning"),
    # --- Completions
    Target(_COMPLETION_GEN, "replaced", "the completions stream"),
    Target(f"{COMPLETION}:OpenAIServingCompletion.__init__", "called",
           "the server options the coverage and the generator read"),
    Target(f"{COMPLETION}:OpenAIServingCompletion._create_completion_logprobs", "reproduced",
           "a step's completion logprobs and text offsets"),
    Target(f"{COMPLETION}:_delta_frame_template", "reproduced",
           "0.34 on: vLLM's own template of a plain delta (the same bytes as its model)"),
    Target(f"{BASE}:completion_top_logprobs_limit", "reproduced",
           "0.33 on: how many top logprobs a completion position writes"),
    Target(f"{COMPLETION_PROTOCOL}:CompletionRequest", "called",
           "the request's members the plugin reads, their defaults and meaning"),
    # --- both
    Target(f"{BASE}:GenerateBaseServing._get_decoded_token", "reproduced",
           "a top token's text (the table's, or token_id:N)"),
    Target(f"{BASE}:format_token_id_placeholder", "reproduced", "token_id:N"),
    Target(f"{BASE}:GenerateBaseServing._raise_if_error", "called",
           "an 'error' finish raises GenerationError"),
    Target(f"{BASE}:GenerateBaseServing._convert_generation_error_to_streaming_response",
           "called", "the error chunk of a GenerationError"),
    Target(f"{BASE}:GenerateBaseServing.create_streaming_error_response", "called",
           "the error chunk of any other exception (json.dumps)"),
    Target(f"{ENGINE}:BaseServing.create_error_response", "called",
           "0.33 on: the chat error chunk (its model, dumped by pydantic)"),
    Target(f"{ERRORS}:create_error_response", "called", "an exception's error type and code"),
    Target(f"{ENGINE}:BaseServing._extract_prompt_text", "called",
           "the echoed prompt when the engine gives none"),
    Target(f"{BASE}:build_spec_decoding_metrics", "called",
           "speculative decoding metrics (their final chunk is written by vLLM's models)"),
    Target(f"{API_UTILS}:should_include_usage", "called", "usage and continuous usage"),
    Target(f"{COLLECTIONS}:as_list", "reproduced", "the token ids' list"),
    Target(f"{EXCEPTIONS}:GenerationError", "called", "the errors written as GenerationError"),
    # --- the logprobs processor (the API server's output processor)
    Target(_NEW_REQUEST, "wrapped",
           "a covered stream's requests get the tabled processor"),
    Target(f"{ENGINE_LOGPROBS}:LogprobsProcessor._update_sample_logprobs", "reproduced",
           "the tabled processor's own, with the texts from the table"),
    Target(f"{ENGINE_LOGPROBS}:LogprobsProcessor._verify_tokens", "called",
           "the U+FFFD check (its condition reproduced: only partial ids call it)"),
    Target(f"{ENGINE_LOGPROBS}:LogprobsProcessor._correct_decoded_token", "called",
           "the U+FFFD correction, memoised by its id and the 4 sampled ids before it"),
    Target(f"{ENGINE_LOGPROBS}:LogprobsProcessor._get_sampled_context_ids", "called",
           "the context of a correction (reproduced on records)"),
    Target(f"{ENGINE_LOGPROBS}:LogprobsProcessor.update_from_output", "called",
           "carries the records to the outputs unread"),
    Target(f"{LOGPROBS}:create_sample_logprobs", "called", "a request's list of positions"),
    Target(f"{LOGPROBS}:append_logprobs_for_next_position", "reproduced",
           "a position's dict (a record is its arguments; read as that dict)"),
    Target(f"{LOGPROBS}:Logprob", "called", "a position's entries"),
    Target(f"{LOGPROBS}:FlatLogprobs", "called", "flat_logprobs requests' positions"),
    Target(f"{DETOKENIZER}:convert_ids_list_to_tokens", "reproduced",
           "a top token's text (the table holds its result per id)"),
    Target(f"{DETOKENIZER}:get_leading_space_marker", "reproduced",
           "called by convert_ids_list_to_tokens"),
    Target(f"{DETOKENIZER}:_restore_leading_spaces", "reproduced",
           "called by convert_ids_list_to_tokens"),
    Target(f"{OUTPUT_PROCESSOR}:RequestState._new_completion_output", "called",
           "slices the records into an output unread"),
    Target(f"{OUTPUTS}:RequestOutput.add", "called", "merges outputs' records unread"),
    Target(f"{OUTPUTS}:RequestOutput", "called", "the engine output the generators read"),
    Target(f"{OUTPUTS}:CompletionOutput", "called", "the choice output the generators read"),
    # --- the chunk models
    Target(f"{CHAT_PROTOCOL}:ChatCompletionStreamResponse", "model", _MODEL),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionResponseStreamChoice", "model", _MODEL),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionLogProbs", "model", _MODEL),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionLogProbsContent", "model", _MODEL),
    Target(f"{CHAT_PROTOCOL}:ChatCompletionLogProb", "model", _MODEL),
    Target(f"{BASE_PROTOCOL}:DeltaMessage", "model", _MODEL),
    Target(f"{BASE_PROTOCOL}:DeltaToolCall", "model", _MODEL),
    Target(f"{BASE_PROTOCOL}:DeltaFunctionCall", "model", _MODEL),
    Target(f"{BASE_PROTOCOL}:PerRequestMetrics", "model",
           "the final usage chunk's metrics (written by vLLM's models)"),
    Target(f"{COMPLETION_PROTOCOL}:CompletionStreamResponse", "model", _MODEL),
    Target(f"{COMPLETION_PROTOCOL}:CompletionResponseStreamChoice", "model", _MODEL),
    Target(f"{COMPLETION_PROTOCOL}:CompletionLogProbs", "model", _MODEL),
    Target(f"{ENGINE_PROTOCOL}:UsageInfo", "model", _MODEL),
    Target(f"{ENGINE_PROTOCOL}:PromptTokenUsageInfo", "model", _MODEL),
    Target(f"{ENGINE_PROTOCOL}:CompletionTokenUsageInfo", "model", _MODEL),
    Target(f"{ENGINE_PROTOCOL}:OpenAIBaseModel", "model", "the models' configuration"),
    Target(f"{ENGINE_PROTOCOL}:ErrorResponse", "model", "the error chunks"),
    Target(f"{ENGINE_PROTOCOL}:ErrorInfo", "model", "the error chunks"),
)

PATCHES: tuple[Patch, ...] = (
    Patch(_CHAT_GEN, "replace",
          why="vLLM builds a pydantic chunk per token and choice and dumps it (0.33 on: its "
              "raw generator yields the models, its wrapper dumps them): most of the API "
              "server's CPU per streamed token is building and dumping those objects",
          how="the class attribute set to a function that decides per request, before the "
              "first byte, whether the request is covered (_vllm_coverage.chat_covered): "
              "then the plugin's generator (_vllm_chat) writes each step with the stream "
              "writer straight from the engine's outputs; else vLLM's own generator, "
              "called as it is. Subclasses that override it (Anthropic, Cohere on 0.33+) "
              "are not reached",
          reproduces=(_CHAT_GEN, _CHAT_RAW, f"{CHAT_STEP}:ChatStreamProcessor.step",
                      f"{TOOL_CALLS}:resolve_finish_reason",
                      f"{CHAT}:OpenAIServingChat._create_chat_logprobs",
                      f"{CHAT}:OpenAIServingChat._get_top_logprobs",
                      f"{BASE}:chat_top_logprobs_limit",
                      f"{BASE}:GenerateBaseServing._get_decoded_token"),
          retire="vLLM writes its chat deltas from a template made once per stream (as 0.34 "
                 "does for plain completion deltas), logprobs included, and reads no "
                 "Logprob objects"),
    Patch(_COMPLETION_GEN, "replace",
          why="the same, for completions (0.34 writes plain deltas from a template of its "
              "own, but not logprobs, token ids, echo or continuous usage)",
          how="as the chat generator: _vllm_coverage.completion_covered decides, "
              "_vllm_completion writes",
          reproduces=(_COMPLETION_GEN,
                      f"{COMPLETION}:OpenAIServingCompletion._create_completion_logprobs",
                      f"{BASE}:completion_top_logprobs_limit",
                      f"{COMPLETION}:_delta_frame_template"),
          retire="vLLM writes every completion chunk from a template, logprobs included"),
    Patch(_NEW_REQUEST, "wrap",
          why="vLLM's logprobs processor decodes every top token of every step alone "
              "(convert_ids_list_to_tokens: a tokenizer.decode per token) and builds a dict "
              "of Logprob objects per position, only for the generators to read them back",
          how="the classmethod wrapped: the processors made while a covered stream awaits "
              "its first step (a context mark, _vllm_processor) become the tabled subclass, "
              "which takes each id's text from a table per tokenizer, memoises vLLM's "
              "U+FFFD correction and keeps each position as the arguments of vLLM's "
              "append_logprobs_for_next_position (a record); every other request gets "
              "vLLM's processor",
          reproduces=(f"{ENGINE_LOGPROBS}:LogprobsProcessor._update_sample_logprobs",
                      f"{LOGPROBS}:append_logprobs_for_next_position",
                      f"{DETOKENIZER}:convert_ids_list_to_tokens"),
          retire="vLLM caches each id's decoded text per tokenizer and keeps a position's "
                 "logprobs as arrays until a writer reads them"),
)
