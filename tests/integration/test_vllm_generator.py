"""The plugin's generator mode (tokcore.plugins._vllm_stream) against vLLM itself
(``make test-vllm``: vLLM's CPU wheel in a venv of its own; skipped where vLLM is not
installed, as in make test's venv).

Each stream is made of real vLLM ``RequestOutput`` / ``CompletionOutput`` objects, their
logprobs made by vLLM's own logprobs processor (vLLM's for vLLM's generator, the table's for
ours) from a tokenizer trained here with ``tokenizers`` (byte-level, so a token alone can
decode to U+FFFD), or written by hand (``nan``, ``-inf``, the sampled token missing). vLLM's
own generator and the replaced one are fed the same outputs: the bytes must be the same but
for ``created`` (the chat generator reads the clock). Some streams come from vLLM's own
``AsyncLLM`` front end in this process, on an engine core stand-in (_vllm_engine.py). Then the
install's checks: every source, pydantic-core's release and vLLM's chunk models changed in
turn, each refused with one WARNING line naming it."""

from __future__ import annotations

import asyncio
import importlib
import random
import re
import sys
import warnings
from collections.abc import AsyncIterator, Callable, Iterator
from typing import Any, ClassVar

import pytest
from hypothesis import given
from hypothesis import strategies as st

pytest.importorskip("vllm", reason="vLLM is not installed here: make test-vllm runs this")

with warnings.catch_warnings():  # (torch, imported by vLLM's engine modules, warns)
    warnings.simplefilter("ignore", DeprecationWarning)
    import numpy as np  # noqa: E402
    from vllm.entrypoints.generate.base.protocol import (  # noqa: E402
        RequestResponseMetadata,
    )
    from vllm.entrypoints.openai.chat_completion.protocol import (  # noqa: E402
        ChatCompletionRequest,
    )
    from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat  # noqa: E402
    from vllm.entrypoints.openai.completion.protocol import CompletionRequest  # noqa: E402
    from vllm.entrypoints.openai.completion.serving import (  # noqa: E402
        OpenAIServingCompletion,
    )
    from vllm.logprobs import (  # noqa: E402
        FlatLogprobs,
        Logprob,
        append_logprobs_for_next_position,
    )
    from vllm.outputs import CompletionOutput, RequestOutput  # noqa: E402
    from vllm.tokenizers.detokenizer_utils import convert_ids_list_to_tokens  # noqa: E402
    from vllm.v1.engine.logprobs import LogprobsProcessor  # noqa: E402

from tokcore.plugins import _vllm_chat, _vllm_completion, _vllm_logprobs  # noqa: E402
from tokcore.plugins import _vllm_names as names  # noqa: E402
from tokcore.plugins import _vllm_patch as patch  # noqa: E402
from tokcore.plugins import _vllm_processor as tabling  # noqa: E402
from tokcore.plugins import _vllm_releases as releases  # noqa: E402
from tokcore.plugins import _vllm_shapes as shapes  # noqa: E402
from tokcore.plugins import _vllm_table as tables  # noqa: E402
from tokcore.plugins import _vllm_targets as targets  # noqa: E402
from tokcore.plugins import vllm as plugin  # noqa: E402

#: vLLM's own generators (the plugin's are installed for the module)
CHAT = vars(OpenAIServingChat)["chat_completion_stream_generator"]
COMPLETION = vars(OpenAIServingCompletion)["completion_stream_generator"]
NEW_REQUEST = vars(LogprobsProcessor)["from_new_request"]
#: the tabled logprobs processor (what the plugin gives the requests it writes)
TABLED = tabling.tabled_class(LogprobsProcessor, append_logprobs_for_next_position,
                                convert_ids_list_to_tokens)
#: this vLLM's release (the plugin knows it: test_this_release_is_known)
RELEASE = releases.detect(releases.fingerprint())[0]
RULES = RELEASE.rules if RELEASE is not None else None


def vllms(positions: Any) -> list[Any]:
    return tabling.vllms(positions, append_logprobs_for_next_position)


def token_table(tokenizer: Any) -> Any:
    return tables.table(tokenizer, convert_ids_list_to_tokens)

#: the model name the streams are written with
MODEL = "model/é"
TEXT = ("Plain words, \"quotes\", back\\slashes, tabs\t and newlines\n; accents é à ü ñ, "
        "Ελληνικά, русский, 中文字符, 日本語のテキスト, emoji 🙂🚀🧪, control \x01\x1f, "
        "<b>markup</b> & {json: [1, 2]} </script> \u2028 \u2029 end. ")


@pytest.fixture(scope="module")
def tokenizer() -> Any:
    """A byte-level BPE tokenizer trained here on TEXT (no download): a multi-byte
    character is often split, so a token alone decodes to U+FFFD."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400, special_tokens=["<s>", "</s>"],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 20 + [TEXT[i:] for i in range(0, len(TEXT), 7)],
                            trainer=trainer)
    return PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")


@pytest.fixture(scope="module", autouse=True)
def installed() -> Iterator[None]:
    assert patch.install()
    try:
        yield
    finally:
        patch.uninstall()


def serving_chat(**options: Any) -> Any:
    serving = object.__new__(OpenAIServingChat)
    vars(serving).update(dict(
        parser_cls=None, _include_reasoning_tokens_details=False, enable_log_outputs=False,
        request_logger=None, response_role="assistant", enable_force_include_usage=False,
        system_fingerprint=None, enable_prompt_tokens_details=False,
        enable_per_request_metrics=False, return_tokens_as_token_ids=False,
        log_error_stack=False, enable_auto_tools=False, enable_log_deltas=True), **options)
    return serving


def serving_completion(**options: Any) -> Any:
    serving = object.__new__(OpenAIServingCompletion)
    vars(serving).update(dict(
        enable_force_include_usage=False, system_fingerprint=None,
        enable_prompt_tokens_details=False, enable_per_request_metrics=False,
        return_tokens_as_token_ids=False, log_error_stack=False, enable_log_outputs=False,
        enable_log_deltas=True, request_logger=None), **options)
    return serving


# --- streams

class Script:
    """A stream's steps, drawn once, made into vLLM outputs any number of times (each run
    gets fresh objects, its logprobs made by the processor class given)."""

    def __init__(self, rng: random.Random, tokenizer: Any, *, n: int, prompts: int,
                 logprobs: int | None, odd: str | None = None, flat: bool = False) -> None:
        self.tokenizer = tokenizer
        self.vocab = len(tokenizer)
        self.n, self.prompts, self.k, self.odd, self.flat = n, prompts, logprobs, odd, flat
        self.prompt_ids = [[rng.randrange(self.vocab) for _ in range(rng.randint(1, 6))]
                           for _ in range(prompts)]
        self.cached = rng.choice([None, 0, 3])
        # per (prompt, choice): steps of (token ids, text, finish, stop_reason)
        self.steps: dict[tuple[int, int], list[tuple[list[int], str, str | None, Any]]] = {}
        self.draws: dict[tuple[int, int], list[tuple[list[list[int]], list[list[float]],
                                                      list[int]]]] = {}
        for p in range(prompts):
            for c in range(n):
                count = rng.randint(1, 7)
                steps = []
                draws = []
                for s in range(count):
                    m = rng.choice([1, 1, 1, 2, 3]) if s or rng.random() < 0.8 else 0
                    ids = [rng.randrange(self.vocab) for _ in range(m)]
                    text = tokenizer.decode(ids) if rng.random() < 0.8 else rng.choice(
                        ["", "\ufffd", "é\"\\", "\n\t\x00", "🙂", "</s>"])
                    finish = stop = None
                    if s == count - 1:
                        finish = rng.choice(["stop", "length", "stop"])
                        stop = rng.choice([None, "\n", 2]) if finish == "stop" else None
                    steps.append((ids, text, finish, stop))
                    rows_ids, rows_lp, ranks = [], [], []
                    for sampled in ids:
                        k = self.k or 0
                        top = [rng.randrange(self.vocab) for _ in range(k)]
                        if k and rng.random() < 0.4:
                            top[rng.randrange(k)] = sampled  # the sampled among the top
                        elif k and rng.random() < 0.4:
                            top[0] = sampled  # the top one (greedy: vLLM's usual row)
                        values = sorted((rng.uniform(-12, 0) for _ in range(k)), reverse=True)
                        for special in (float("-inf"), float("nan"), -0.0, 0.0, -1e-7,
                                        -1.5e-5, -123456.789):
                            if values and rng.random() < 0.1:
                                values[rng.randrange(len(values))] = special
                        first = rng.choice([rng.uniform(-9, 0), float("-inf"), float("nan"),
                                            -20000.0]) if rng.random() < 0.3 else \
                            rng.uniform(-3, 0)
                        rows_ids.append([sampled, *top])
                        rows_lp.append([first, *values])
                        ranks.append(rng.randint(1, 50))
                    draws.append((rows_ids, rows_lp, ranks))
                self.steps[p, c] = steps
                self.draws[p, c] = draws
        self.order = [(p, c, s) for p in range(prompts) for c in range(n)
                      for s in range(len(self.steps[p, c]))]
        # engine order: each key's steps in order, keys interleaved at random
        queues = {key: list(range(len(v))) for key, v in self.steps.items()}
        self.order = []
        while queues:
            key = rng.choice(sorted(queues))
            self.order.append((*key, queues[key].pop(0)))
            if not queues[key]:
                del queues[key]

    def outputs(self, processor: type) -> list[tuple[int, RequestOutput]]:
        """The stream as (prompt index, RequestOutput), one choice's step each."""
        processors = {}
        if self.k is not None:
            for key in self.steps:
                processors[key] = processor(
                    tokenizer=self.tokenizer, logprobs=FlatLogprobs() if self.flat else [],
                    prompt_logprobs=None,
                    cumulative_logprob=0.0, num_logprobs=self.k, num_prompt_logprobs=None)
        result = []
        for p, c, s in self.order:
            ids, text, finish, stop = self.steps[p, c][s]
            logprobs = None
            if self.k is not None:
                proc = processors[p, c]
                rows_ids, rows_lp, ranks = self.draws[p, c][s]
                if ids and s % 2:  # a list of rows
                    proc._update_sample_logprobs((
                        [np.array(r, dtype=np.int64) for r in rows_ids],
                        [np.array(r, dtype=np.float64) for r in rows_lp],
                        [np.array(r, dtype=np.int64) for r in ranks], None))
                elif ids:  # numpy's 2-d arrays, as vLLM's engine sends them
                    proc._update_sample_logprobs((
                        np.array(rows_ids, dtype=np.int32), np.array(rows_lp, dtype=np.float32),
                        np.array(ranks, dtype=np.int64), None))
                logprobs = proc.logprobs[-len(ids):] if ids else proc.logprobs[:0]
                if self.odd == "missing" and ids and s == 0:
                    logprobs = [dict(position) for position in vllms(logprobs)]
                    del logprobs[0][ids[0]]
                if self.odd == "undecoded" and ids and s == 0:
                    logprobs = [{i: Logprob(lp.logprob, lp.rank, None)
                                 for i, lp in position.items()}
                                for position in vllms(logprobs)]
            output = CompletionOutput(index=c, text=text, token_ids=list(ids),
                                      cumulative_logprob=None, logprobs=logprobs,
                                      finish_reason=finish, stop_reason=stop)
            res = RequestOutput(request_id=f"r-{p}", prompt=f"prompt {p}: \"é\"\n",
                                prompt_token_ids=list(self.prompt_ids[p]),
                                prompt_logprobs=None, outputs=[output],
                                finished=finish is not None, num_cached_tokens=self.cached)
            result.append((p, res))
        return result


async def _feed(items: list[Any]) -> AsyncIterator[Any]:
    """The items, one a step; an exception among them is raised there (as vLLM's result
    generator raises a request's error)."""
    for item in items:
        await asyncio.sleep(0)
        error = item[1] if type(item) is tuple else item
        if isinstance(error, BaseException):
            raise error
        yield item


async def _drain(gen: Any) -> bytes:
    out = []
    async for chunk in gen:
        out.append(chunk.encode() if isinstance(chunk, str) else chunk)
    return b"".join(out)


def _masked(body: bytes) -> bytes:
    """The body with ``created`` and vLLM's random tool call ids held still."""
    return re.sub(rb'"id":"chatcmpl-tool-[0-9a-f]+"', b'"id":"chatcmpl-tool-0"',
                  re.sub(rb'"created":\d+', b'"created":0', body))


def run_chat(serving: Any, request: dict[str, Any], script: Script, ours: bool,
             tabled: bool | None = None) -> tuple[bytes, Any, str]:
    req = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
         **request})
    # (the tabled processor: for the requests the installed generator writes itself)
    kind = TABLED if (ours if tabled is None else tabled) else LogprobsProcessor
    outputs = [res for _, res in script.outputs(kind)]
    meta = RequestResponseMetadata(request_id="chatcmpl-x")
    method = OpenAIServingChat.chat_completion_stream_generator if ours else CHAT
    gen = method(serving, req, _feed(outputs), "chatcmpl-x", MODEL,
                 [{"role": "user", "content": "hi"}], script.tokenizer, meta,
                 chat_template_kwargs=getattr(script, "chat_template_kwargs", None))
    body = asyncio.run(_drain(gen))
    return body, meta.final_usage_info, gen.ag_code


def run_completion(serving: Any, request: dict[str, Any], script: Script, ours: bool,
                   tabled: bool | None = None) -> tuple[bytes, Any, str]:
    req = CompletionRequest.model_validate(
        {"model": "m", "prompt": ["a", "b", "c"][:script.prompts] if script.prompts > 1
         else "a", "stream": True, "max_tokens": 16, **request})
    # (the tabled processor: for the requests the installed generator writes itself)
    kind = TABLED if (ours if tabled is None else tabled) else LogprobsProcessor
    outputs = script.outputs(kind)
    meta = RequestResponseMetadata(request_id="cmpl-x")
    method = OpenAIServingCompletion.completion_stream_generator if ours else COMPLETION
    gen = method(serving, req, [{}] * script.prompts, _feed(outputs), "cmpl-x", 1234567,
                 MODEL, num_prompts=script.prompts, tokenizer=script.tokenizer,
                 request_metadata=meta)
    body = asyncio.run(_drain(gen))
    return body, meta.final_usage_info, gen.ag_code


#: vLLM's error chunk, in either form (json.dumps', pydantic's)
ERROR = re.compile(rb'(^|\n\n)data: \{"error": ?\{')


def same(run: Callable[..., tuple[bytes, Any, Any]], serving: Any, request: dict[str, Any],
         script: Any, covered: bool = True, error: bool | None = False) -> bytes:
    """The stream written by vLLM's own generator and by the plugin's (``covered``: the
    plugin's generator writes it, else vLLM's): the same bytes, but for ``created``, and the
    same usage for vLLM's middleware. vLLM's stream is no error chunk unless ``error``:
    a stand-in that vLLM's own generator fails on would make every stream one (None: either
    way)."""
    theirs, their_usage, _ = run(serving, request, script, False)
    ours, our_usage, code = run(serving, request, script, True, covered)
    plugin_code = (_vllm_chat if run is run_chat else _vllm_completion).stream.__code__
    assert (code is plugin_code) == covered, code
    assert error is None or bool(ERROR.search(theirs)) == error, theirs[-600:]
    assert _masked(ours) == _masked(theirs)
    assert our_usage == their_usage
    assert b"data: [DONE]\n\n" == ours[-14:]
    return ours


CHAT_REQUESTS = [
    {},
    {"stream_options": {"include_usage": True}},
    {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"stream_options": {"include_usage": False, "continuous_usage_stats": True}},
    {"return_token_ids": True},
    {"logprobs": True},
    {"logprobs": True, "top_logprobs": 0},
    {"logprobs": True, "top_logprobs": 2},
    {"logprobs": True, "top_logprobs": 5, "return_token_ids": True,
     "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"logprobs": True, "top_logprobs": 3, "return_tokens_as_token_ids": True},
    {"logprobs": True, "top_logprobs": -1},
    {"n": 2, "logprobs": True, "top_logprobs": 1},
    {"n": 3, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"echo": True},  # the last message is the user's: nothing echoed
    {"stop": ["\n"], "stop_token_ids": [2], "max_tokens": 1},
]


def _k(request: dict[str, Any], chat: bool) -> int | None:
    if chat:
        return None if not request.get("logprobs") else max(request.get("top_logprobs") or 0,
                                                            0) + 1
    lp = request.get("logprobs")
    return None if lp is None else max(lp, 0) + 1


@pytest.mark.parametrize("fingerprint", [None, "fp_3e1"])
@pytest.mark.parametrize("request_", CHAT_REQUESTS, ids=repr)
@pytest.mark.parametrize("seed", range(6))
def test_chat_bytes(tokenizer: Any, request_: dict[str, Any], seed: int,
                    fingerprint: str | None) -> None:
    rng = random.Random(f"chat{seed}{request_}")
    script = Script(rng, tokenizer, n=request_.get("n", 1), prompts=1,
                    logprobs=_k(request_, True))
    same(run_chat, serving_chat(system_fingerprint=fingerprint), request_, script)


def test_chat_server_options(tokenizer: Any) -> None:
    """Forced usage, the server's return_tokens_as_token_ids: still ours; prompt details or
    per-request metrics with usage, a parser, logging outputs, return_prompt_text, an echo
    that echoes: vLLM's own generator."""
    for seed in range(4):
        rng = random.Random(seed)
        script = Script(rng, tokenizer, n=1, prompts=1, logprobs=3)
        request = {"logprobs": True, "top_logprobs": 2}
        same(run_chat, serving_chat(enable_force_include_usage=True), request, script)
        same(run_chat, serving_chat(return_tokens_as_token_ids=True), request, script)
        for options in ({"enable_prompt_tokens_details": True},
                        {"enable_per_request_metrics": True}):
            same(run_chat, serving_chat(**options), {
                **request, "stream_options": {"include_usage": True}}, script, covered=False)
            same(run_chat, serving_chat(**options), request, script)
        same(run_chat, serving_chat(), {**request, "return_prompt_text": True}, script,
             covered=False)
        same(run_chat, serving_chat(), {"echo": True, "add_generation_prompt": False},
             script, covered=False)


@pytest.mark.parametrize("seed", range(6))
def test_flat_logprobs(tokenizer: Any, seed: int) -> None:
    """The sampling parameters' flat_logprobs: vLLM's FlatLogprobs, the same bytes."""
    script = Script(random.Random(seed), tokenizer, n=2, prompts=1, logprobs=4, flat=True)
    same(run_chat, serving_chat(), {"n": 2, "logprobs": True, "top_logprobs": 3}, script)
    same(run_completion, serving_completion(), {"n": 2, "logprobs": 3}, script)


@pytest.mark.parametrize("odd", ["missing", "undecoded"])
def test_chat_odd_logprobs_by_vllms_models(tokenizer: Any, odd: str) -> None:
    for seed in range(4):
        script = Script(random.Random(seed), tokenizer, n=1, prompts=1, logprobs=3, odd=odd)
        same(run_chat, serving_chat(system_fingerprint="fp"),
             {"logprobs": True, "top_logprobs": 2, "return_token_ids": True}, script)


COMPLETION_REQUESTS = [
    {},
    {"stream_options": {"include_usage": True}},
    {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"return_token_ids": True},
    {"echo": True},
    {"echo": True, "return_token_ids": True},
    {"echo": True, "max_tokens": 0},
    {"logprobs": 0},
    {"logprobs": 1},
    {"logprobs": 5, "return_token_ids": True,
     "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"logprobs": 3, "return_tokens_as_token_ids": True},
    {"logprobs": -1},
    {"n": 2, "logprobs": 2},
    {"stop": ["\n"], "stop_token_ids": [2], "max_tokens": 1},
]


@pytest.mark.parametrize("prompts", [1, 2])
@pytest.mark.parametrize("fingerprint", [None, "fp_3e1"])
@pytest.mark.parametrize("request_", COMPLETION_REQUESTS, ids=repr)
@pytest.mark.parametrize("seed", range(5))
def test_completion_bytes(tokenizer: Any, request_: dict[str, Any], seed: int,
                          fingerprint: str | None, prompts: int) -> None:
    rng = random.Random(f"completion{seed}{request_}{prompts}")
    script = Script(rng, tokenizer, n=request_.get("n", 1), prompts=prompts,
                    logprobs=_k(request_, False))
    same(run_completion, serving_completion(system_fingerprint=fingerprint), request_, script)


def test_completion_server_options(tokenizer: Any) -> None:
    for seed in range(4):
        script = Script(random.Random(seed), tokenizer, n=1, prompts=1, logprobs=3)
        usage = {"stream_options": {"include_usage": True}, "logprobs": 2}
        same(run_completion, serving_completion(enable_prompt_tokens_details=True), usage,
             script)
        same(run_completion, serving_completion(enable_force_include_usage=True,
                                                return_tokens_as_token_ids=True),
             {"logprobs": 2}, script)
        same(run_completion, serving_completion(enable_per_request_metrics=True), usage,
             script, covered=False)
        # (vLLM's own: the scripts have no prompt logprobs, so vLLM's generator fails)
        same(run_completion, serving_completion(), {"echo": True, "logprobs": 1}, script,
             covered=False, error=True)


@pytest.mark.parametrize("odd", ["missing", "undecoded"])
def test_completion_odd_logprobs_by_vllms_models(tokenizer: Any, odd: str) -> None:
    for seed in range(4):
        script = Script(random.Random(seed), tokenizer, n=1, prompts=1, logprobs=3, odd=odd)
        same(run_completion, serving_completion(system_fingerprint="fp"),
             {"logprobs": 2, "return_token_ids": True}, script,
             error=None)  # ("missing": vLLM's KeyError, an error chunk, where it has ids)


def test_an_error_finish_is_vllms_error_chunk(tokenizer: Any) -> None:
    script = Script(random.Random(1), tokenizer, n=1, prompts=1, logprobs=None)
    key = next(iter(script.steps))
    ids, text, _, _ = script.steps[key][-1]
    script.steps[key][-1] = (ids, text, "error", None)
    body = same(run_chat, serving_chat(), {}, script, error=True)
    error = body.split(b"\n\n")[-3]
    assert error == (b'data: {"error":{"message":"Internal server error","type":'
                     b'"InternalServerError","param":null,"code":500}}' if RULES.chat_error_model
                     else b'data: {"error": {"message": "Internal server error", "type": '
                     b'"InternalServerError", "param": null, "code": 500}}'), error
    body = same(run_completion, serving_completion(), {}, script, error=True)
    assert b'"InternalServerError"' in body


class Steps:
    """A stream written by hand: each step a ``RequestOutput`` of several outputs, as vLLM
    merges a request's outputs when its API server lags (the same objects for each run)."""

    def __init__(self, tokenizer: Any, steps: list[tuple[int, Any]], prompts: int = 1,
                 cached: int | None = None, kv_transfer_params: Any = None) -> None:
        """``steps``: (prompt index, the outputs as dicts, or an exception the result
        generator raises there); ``kv_transfer_params``: on the steps that finish every
        output (as a disaggregated prefill's engine output carries them)."""
        self.tokenizer, self.steps, self.prompts = tokenizer, steps, prompts
        self.cached, self.kv = cached, kv_transfer_params

    def outputs(self, processor: type) -> list[tuple[int, Any]]:
        result: list[tuple[int, Any]] = []
        for p, outputs in self.steps:
            if isinstance(outputs, BaseException):
                result.append((p, outputs))
                continue
            made = [CompletionOutput(
                index=o["index"], text=o.get("text", ""), token_ids=list(o.get("ids", [])),
                cumulative_logprob=None, logprobs=o.get("logprobs"),
                finish_reason=o.get("finish"), stop_reason=None) for o in outputs]
            finished = all(o.get("finish") for o in outputs)
            result.append((p, RequestOutput(
                request_id=f"r-{p}", prompt=f"prompt {p}", prompt_token_ids=[1, 2, 3],
                prompt_logprobs=None, outputs=made, finished=finished,
                num_cached_tokens=self.cached,
                kv_transfer_params=self.kv if finished else None)))
        return result


def _logprobs(ids: list[int], missing: bool = False) -> list[dict[int, Logprob]]:
    """A position per id, as vLLM's processor makes it (the sampled id first, then a top
    one); ``missing``: without the sampled id's entry."""
    made = [{i: Logprob(-0.25, 1, f"t{i}"), i + 1: Logprob(-1.5, 2, f"t{i + 1}")}
            for i in ids]
    if missing:
        for i, position in zip(ids, made, strict=True):
            del position[i]
    return made


@pytest.mark.parametrize("first", [False, True])
@pytest.mark.parametrize("odd", ["error", "missing"])
@pytest.mark.parametrize("api", ["chat", "completion", "completion, two prompts"])
def test_a_step_whose_one_output_raises(tokenizer: Any, api: str, odd: str,
                                        first: bool) -> None:
    """A step of n=2 outputs where one raises (an "error" finish; a completion whose sampled
    id is missing from its logprobs: vLLM's KeyError) writes what vLLM's generator writes:
    the chunks of the outputs before it, then the error chunk, then [DONE] (a chat
    position without the sampled id is no error: vLLM's models write it)."""
    logprobs = odd == "missing"
    ok = [{"index": 0, "text": "A", "ids": [5], "logprobs": _logprobs([5])},
          {"index": 1, "text": "B", "ids": [6], "logprobs": _logprobs([6])}]
    bad = {"index": 1, "text": "", "ids": [], "finish": "error", "logprobs": []} \
        if odd == "error" else \
        {"index": 1, "text": "D", "ids": [8], "logprobs": _logprobs([8], missing=True)}
    good = {"index": 0, "text": "C", "ids": [7], "logprobs": _logprobs([7])}
    step = [bad, good] if first else [good, bad]
    if not logprobs:
        for output in [*ok, *step]:
            output.pop("logprobs")
    if api == "chat":
        request: dict[str, Any] = {"n": 2, "return_token_ids": True}
        if logprobs:
            request.update(logprobs=True, top_logprobs=1)
        body = same(run_chat, serving_chat(), request, Steps(tokenizer, [(0, ok), (0, step)]),
                    error=odd == "error")
    else:
        prompts = 2 if "two" in api else 1
        request = {"n": 2, "return_token_ids": True, **({"logprobs": 1} if logprobs else {})}
        steps = [(0, ok), (prompts - 1, step)]
        body = same(run_completion, serving_completion(), request,
                    Steps(tokenizer, steps, prompts), error=True)
    events = body.split(b"\n\n")
    if api == "chat" and odd == "missing":
        assert b"error" not in body
        return
    assert b'"error"' in events[-3] and events[-2:] == [b"data: [DONE]", b""], events
    assert (b'"text":"C"' in body or b'"content":"C"' in body) != first


# --- what 0.33 and 0.34 changed (each release's own generator says what it writes)

@pytest.mark.parametrize("api", ["chat", "completion"])
@pytest.mark.parametrize("request_", [
    {}, {"return_token_ids": True}, {"logprobs": 2},
    {"stream_options": {"include_usage": True, "continuous_usage_stats": True}}], ids=repr)
def test_an_empty_first_output_that_finishes(tokenizer: Any, api: str,
                                             request_: dict[str, Any]) -> None:
    """A choice whose first output has no text and no token and finishes (a length or abort
    before any token): 0.32 writes nothing for it, 0.33 on a finish chunk (chat
    ``"delta":{}``); beside it, a choice that streams, and a later empty output that
    finishes, written by every release."""
    logprobs = "logprobs" in request_
    steps = [(0, [{"index": 0, "text": "A", "ids": [5]}]),
             (0, [{"index": 1, "text": "", "ids": [], "finish": "length"}]),
             (0, [{"index": 0, "text": "", "ids": [], "finish": "stop"}])]
    for _, outputs in steps:
        for output in outputs:
            if logprobs:
                output["logprobs"] = _logprobs(output["ids"])
    request = {"n": 2, **request_}
    if api == "chat":
        if logprobs:
            request = {**request, "logprobs": True, "top_logprobs": 1}
        body = same(run_chat, serving_chat(), request, Steps(tokenizer, steps))
        empty = b'"index":1,"delta":{},'
    else:
        if logprobs:
            request = {**request, "logprobs": 1}
        body = same(run_completion, serving_completion(), request, Steps(tokenizer, steps))
        empty = b'"index":1,"text":"",'
    assert (empty in body) == RULES.empty_finish, body


@pytest.mark.parametrize("api", ["chat", "completion"])
@pytest.mark.parametrize("logprobs", [False, True])
def test_kv_transfer_params_on_the_finish(tokenizer: Any, api: str, logprobs: bool) -> None:
    """A finishing engine output that carries kv_transfer_params (a disaggregated prefill's):
    0.33 on writes them on the finish chunk (vLLM's models write that chunk for the plugin),
    null on every other chunk its loop builds; 0.32 writes no such member."""
    params = {"do_remote_prefill": True, "remote_block_ids": [1, 2], "remote_host": "h"}
    steps = [(0, [{"index": 0, "text": "A", "ids": [5]}]),
             (0, [{"index": 0, "text": "B", "ids": [6], "finish": "length"}])]
    if logprobs:
        for _, outputs in steps:
            outputs[0]["logprobs"] = _logprobs(outputs[0]["ids"])
    script = Steps(tokenizer, steps, kv_transfer_params=params)
    request: dict[str, Any] = {"return_token_ids": True}
    if api == "chat":
        body = same(run_chat, serving_chat(system_fingerprint="fp"),
                    {**request, **({"logprobs": True, "top_logprobs": 1} if logprobs else {})},
                    script)
    else:
        body = same(run_completion, serving_completion(system_fingerprint="fp"),
                    {**request, **({"logprobs": 1} if logprobs else {})}, script)
    assert (b'"kv_transfer_params":{"do_remote_prefill":true,' in body) == \
        RULES.kv_transfer_params, body
    assert (b'"kv_transfer_params":null' in body) == RULES.kv_transfer_params, body


@pytest.mark.parametrize("api", ["chat", "completion"])
@pytest.mark.parametrize("error", ["retryable", "generation", "value"])
def test_an_error_from_the_result_generator(tokenizer: Any, api: str, error: str) -> None:
    """The result generator raises after a step (a request rejected by the engine: vLLM's
    RetryableRequestError; a GenerationError; any other exception): the chunks before it,
    then vLLM's error chunk for it (its type and code as the release maps them: 0.33 on,
    completions say ServiceUnavailableError for a retryable one, chat InternalServerError),
    then [DONE]."""
    from vllm.exceptions import GenerationError, RetryableRequestError

    raised = {"retryable": RetryableRequestError("rejected on arrival"),
              "generation": GenerationError("boom"), "value": ValueError("bad \"value\" é")}
    steps = [(0, [{"index": 0, "text": "A", "ids": [5]}]), (0, raised[error])]
    run, serving = (run_chat, serving_chat()) if api == "chat" else \
        (run_completion, serving_completion())
    body = same(run, serving, {"stream_options": {"include_usage": True}},
                Steps(tokenizer, steps), error=True)
    events = body.split(b"\n\n")
    assert b'"A"' in events[-4] and b'"error"' in events[-3], events


def _logger() -> Any:
    class Logger:
        def __init__(self) -> None:
            self.calls: list[Any] = []

        def log_outputs(self, **what: Any) -> None:
            self.calls.append(what)

    return Logger()


def test_a_server_that_logs_outputs(tokenizer: Any) -> None:
    """--enable-log-outputs with a request logger: chat keeps vLLM's generator on every
    release; completions too from 0.33 on (they log outputs there), the plugin's on 0.32."""
    script = Script(random.Random(5), tokenizer, n=1, prompts=1, logprobs=None)
    same(run_chat, serving_chat(enable_log_outputs=True, request_logger=_logger()), {},
         script, covered=False)
    same(run_completion, serving_completion(enable_log_outputs=True,
                                            request_logger=_logger()), {}, script,
         covered=not RULES.completion_logs_outputs)


@pytest.mark.skipif(RULES is None or not RULES.weight_versions,
                    reason="return_weight_versions: 0.33 on")
def test_return_weight_versions_is_vllms(tokenizer: Any) -> None:
    script = Script(random.Random(6), tokenizer, n=1, prompts=1, logprobs=None)
    same(run_chat, serving_chat(), {"return_weight_versions": True}, script, covered=False)
    same(run_completion, serving_completion(), {"return_weight_versions": True}, script,
         covered=False)


def test_chat_usage_with_prompt_details_is_vllms(tokenizer: Any) -> None:
    """--enable-prompt-tokens-details with continuous usage and a cached count (0.34 writes
    the prompt details in the role chunk's usage): vLLM's own generator."""
    steps = [(0, [{"index": 0, "text": "A", "ids": [5]}]),
             (0, [{"index": 0, "text": "B", "ids": [6], "finish": "stop"}])]
    body = same(run_chat, serving_chat(enable_prompt_tokens_details=True),
                {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
                Steps(tokenizer, steps, cached=3), covered=False)
    assert b'"cached_tokens":3' in body


@pytest.mark.parametrize("model", ["m-987654321", 'q"987654321\\'])
def test_a_model_name_with_vllms_probe_index(tokenizer: Any, model: str,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """A model name holding the index 0.34's own template probes with: its template is not
    used (its model writes the chunks), the same bytes."""
    monkeypatch.setattr(sys.modules[__name__], "MODEL", model)
    for seed in range(3):
        script = Script(random.Random(seed), tokenizer, n=2, prompts=2, logprobs=None)
        same(run_completion, serving_completion(), {"n": 2}, script)
        same(run_chat, serving_chat(), {"n": 2}, script)


# --- the table

def test_the_table_is_vllms_decode(tokenizer: Any) -> None:
    """Every id's text in the table is convert_ids_list_to_tokens' (some are U+FFFD)."""
    table = tables.TokenTable(tokenizer, convert_ids_list_to_tokens)
    ids = list(range(len(tokenizer)))
    random.Random(0).shuffle(ids)
    expected = convert_ids_list_to_tokens(tokenizer, ids)
    assert table.texts(ids[:50]) == expected[:50]
    assert table.texts(ids) == expected
    assert len(table) == len(ids)
    assert table.partial == {i for i, text in zip(ids, expected, strict=True)
                             if text.endswith("\ufffd")}
    assert table.partial and len(table.partial) < len(ids)
    assert table.texts([]) == []
    assert table.texts(ids[:3] * 2) == expected[:3] * 2
    assert token_table(tokenizer) is token_table(tokenizer)


@pytest.mark.parametrize("cached", [False, True])
def test_a_grown_vocabulary_is_a_new_table(tokenizer: Any, cached: bool) -> None:
    """A tokenizer that gains tokens (``add_tokens``) gets a new table: no text is kept from
    before, for the tokenizer itself and for vLLM's cached copy of it (which shares its
    backend and freezes its ``len()``); a tabled processor made after it reads the new one."""
    import copy

    from vllm.tokenizers.hf import get_cached_tokenizer

    own = copy.deepcopy(tokenizer)
    tok = get_cached_tokenizer(own) if cached else own
    new_id = own.backend_tokenizer.get_vocab_size(with_added_tokens=True)
    old = token_table(tok)
    assert old.texts([new_id, 5]) == convert_ids_list_to_tokens(tok, [new_id, 5])
    assert token_table(tok) is old
    tok.add_tokens(["zqzqz"])
    assert convert_ids_list_to_tokens(tok, [new_id]) == ["zqzqz"]
    assert token_table(tok) is not old
    assert token_table(tok).texts([new_id, 5]) == ["zqzqz", old.texts([5])[0]]
    processor = TABLED(
        tokenizer=tok, logprobs=[], prompt_logprobs=None, cumulative_logprob=0.0,
        num_logprobs=1, num_prompt_logprobs=None)
    processor._update_sample_logprobs((np.array([[new_id, 5]], dtype=np.int32),
                                       np.array([[-0.5, -1.0]], dtype=np.float32),
                                       np.array([1], dtype=np.int64), None))
    assert tabling.position(processor.logprobs[0])[0][2] == "zqzqz"


def test_a_partial_text_is_marked_before_it_is_stored(tokenizer: Any) -> None:
    """``TokenTable.texts`` adds an id to ``partial`` before it stores its text: a reader on
    another thread (a free-threaded build) that finds a text ending in U+FFFD finds its id
    partial too, and vLLM's correction runs."""
    table = tables.TokenTable(tokenizer, convert_ids_list_to_tokens)
    stored: list[int] = []

    class Texts(dict):  # type: ignore[type-arg]
        def __setitem__(self, key: int, value: str) -> None:
            assert not value.endswith("\ufffd") or key in table.partial, key
            stored.append(key)
            super().__setitem__(key, value)

    table._texts = Texts()
    ids = list(range(len(tokenizer)))
    texts = table.texts(ids)
    assert stored == ids and table.partial == {
        i for i, text in zip(ids, texts, strict=True) if text.endswith("\ufffd")}
    assert table.partial


@pytest.mark.parametrize("seed", range(8))
def test_the_tabled_processor_is_vllms(tokenizer: Any, seed: int) -> None:
    """The logprobs vLLM's processor makes and the tabled one makes, from the same lists:
    equal, the texts corrected from the sampled tokens before them included."""
    script = Script(random.Random(seed), tokenizer, n=1, prompts=1, logprobs=6)
    theirs = [res.outputs[0].logprobs for _, res in script.outputs(LogprobsProcessor)]
    ours = [res.outputs[0].logprobs for _, res in script.outputs(
        TABLED)]
    def flat(x: Any) -> Any:
        return [[(i, lp.rank, lp.decoded_token, repr(lp.logprob)) for i, lp in p.items()]
                for step in x for p in vllms(step)]
    assert flat(ours) == flat(theirs)
    # what the generators read of a record: the dict's entries, in its order
    entries = [[(i, repr(lp.logprob), lp.decoded_token) for i, lp in p.items()]
               for step in theirs for p in step]
    assert [[(i, repr(lp), text) for i, lp, text in tabling.position(p)]
            for step in ours for p in step] == entries
    assert all(type(p) is tuple for step in ours for p in step)


@pytest.mark.parametrize("seed", range(20))
def test_a_record_reads_as_vllms_dict(seed: int) -> None:
    """A record, read by ``_position``: the entries of the dict vLLM's
    ``append_logprobs_for_next_position`` makes from the same arguments, in order (its zip
    cut by ``num_logprobs``, -1 too; a repeated id in its first place with its last
    values); ``_record_dict`` is that dict."""
    from vllm.logprobs import append_logprobs_for_next_position

    rng = random.Random(seed)
    for _ in range(50):
        size = rng.randint(1, 8)
        ids = [rng.randrange(6) for _ in range(size)]  # (small ids: repeats)
        if size > 1 and rng.random() < 0.3:  # the sampled id again first of the top ones
            ids = [ids[0], *rng.sample(range(9), size - 1)]
            ids[1] = ids[0] if ids[0] not in ids[2:] else ids[1]
        logprobs = [rng.choice([rng.uniform(-9, 0), float("-inf"), float("nan")])
                    for _ in range(size)]
        texts = [rng.choice(["a", "\ufffd", "", "é"]) for _ in range(size)]
        num = rng.choice([-1, 0, 1, 2, size - 1, size + 3])
        record = (ids, logprobs, texts, rng.randint(1, 9), num)
        made: list[Any] = []
        append_logprobs_for_next_position(made, *record)
        assert [(i, repr(lp), text) for i, lp, text in tabling.position(record)] == \
            [(i, repr(e.logprob), e.decoded_token) for i, e in made[0].items()]
        assert tabling.record_dict(record, append_logprobs_for_next_position) == made[0]
        # a completion's entries from the record (straight from its lists where it can)
        # and from vLLM's dict: the same
        for top, every in [(0, False), (1, False), (2, False), (5, False), (-1, False),
                           (1, True)]:
            got = _vllm_logprobs.completion_logprobs([ids[0]], [record], top, every, False, 3)
            assert repr(got) == repr(_vllm_logprobs.completion_logprobs(
                [ids[0]], [made[0]], top, every, False, 3))


def test_only_our_requests_are_tabled(tokenizer: Any) -> None:
    """from_new_request makes the tabled processor only between ``_mark`` and ``_unmark``
    (what a generator of ours sets around its result generator's first step), in the same
    task, not before nor after."""
    from vllm.sampling_params import SamplingParams

    class Request:
        sampling_params = SamplingParams(logprobs=2)

    def made() -> type:
        return type(LogprobsProcessor.from_new_request(tokenizer, Request()))

    async def task() -> list[type]:
        kinds = [made()]
        mark = tabling.mark()
        kinds.append(made())
        assert tabling.unmark(mark) is None and tabling.unmark(None) is None
        return [*kinds, made()]

    before, during, after = asyncio.run(task())
    assert before is LogprobsProcessor and after is LogprobsProcessor
    assert during is not LogprobsProcessor and issubclass(during, LogprobsProcessor)
    assert made() is LogprobsProcessor


def test_one_task_serves_many_requests(tokenizer: Any) -> None:
    """One task (an application that serves its requests from one long-lived task) serves
    in turn, through vLLM's own AsyncLLM.generate and OutputProcessor (_vllm_engine.py): a
    covered chat stream with logprobs (the tabled processor), the same request by vLLM's own
    generator, a non-streaming one, a subclass's stream, a direct AsyncLLM.generate, a
    covered completions stream of two prompts, its own generator's, and another direct
    generate. Only the covered streams' engine requests take the table's texts; every other
    one gets vLLM's own logprobs (a dict a position) and vLLM's own answer."""
    from _vllm_engine import engine, request, stop
    from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionResponse

    class Subclass(OpenAIServingChat):
        pass

    chat_request = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
         "n": 2, "logprobs": True, "top_logprobs": 3})
    completion_request = CompletionRequest.model_validate(
        {"model": "m", "prompt": ["a", "b"], "stream": True, "max_tokens": 16, "logprobs": 3})
    conversation = [{"role": "user", "content": "hi"}]
    tables._TABLES.clear()

    async def serve() -> None:
        llm = engine(tokenizer)

        def generate(request_id: str, prompt: list[int], n: int = 1,
                     streamed: bool = True) -> Any:
            made = request(request_id, prompt, logprobs=3, n=n, stream=streamed)
            return llm.generate(made, made.sampling_params, request_id,
                                prompt_text=f"prompt {prompt}")

        async def direct(request_id: str) -> None:
            async for res in generate(request_id, [9, 8, 7]):
                for output in res.outputs:
                    assert output.logprobs and all(type(p) is dict for p in output.logprobs)

        async def chat(method: Any, serving: Any, chat_request: Any) -> bytes:
            body = await _drain(method(
                serving, chat_request, generate("chatcmpl-1", [1, 2, 3], n=2), "chatcmpl-1",
                "m", conversation, tokenizer, RequestResponseMetadata(request_id="x")))
            assert b"error" not in body
            return _masked(body)

        async def completion(method: Any) -> bytes:
            from vllm.utils.async_utils import merge_async_iterators

            results = merge_async_iterators(generate("cmpl-2-0", [4, 5]),
                                            generate("cmpl-2-1", [6]))
            body = await _drain(method(
                serving_completion(), completion_request, [{}, {}], results, "cmpl-2",
                1234567, "m", num_prompts=2, tokenizer=tokenizer,
                request_metadata=RequestResponseMetadata(request_id="y")))
            assert b"error" not in body
            # (the prompts' steps interleave as their tasks run: each choice's in order)
            events: dict[bytes, list[bytes]] = {}
            for event in body.split(b"\n\n"):
                index = re.search(rb'"choices":\[\{"index":(\d+)', event)
                events.setdefault(index.group(1) if index else b"", []).append(event)
            return repr(sorted(events.items())).encode()

        try:
            ours = await chat(OpenAIServingChat.chat_completion_stream_generator,
                              serving_chat(), chat_request)
            texts = len(token_table(tokenizer))
            assert texts  # (the covered stream's requests took the table's texts)
            assert await chat(CHAT, serving_chat(), chat_request) == ours
            full = await OpenAIServingChat.chat_completion_full_generator(
                serving_chat(enable_auto_tools=False), chat_request.model_copy(
                    update={"stream": False}),
                generate("chatcmpl-1", [1, 2, 3], n=2, streamed=False), "chatcmpl-1", "m",
                conversation, tokenizer, RequestResponseMetadata(request_id="z"))
            assert type(full) is ChatCompletionResponse, full
            assert all(choice.logprobs.content for choice in full.choices)
            subclass = object.__new__(Subclass)
            vars(subclass).update(vars(serving_chat()))
            assert await chat(OpenAIServingChat.chat_completion_stream_generator, subclass,
                              chat_request) == ours
            await direct("direct-1")
            ours = await completion(OpenAIServingCompletion.completion_stream_generator)
            assert await completion(COMPLETION) == ours
            await direct("direct-2")
            assert len(token_table(tokenizer)) > texts  # (the completions' requests)
        finally:
            await stop(llm)

    asyncio.run(serve())


# --- reasoning parsers: vLLM's own parser objects, their deltas written by the plugin

THINK, END_THINK = "<think>", "</think>"
#: the reasoning parsers the plugin writes the deltas of (vLLM's names for them; "thinking":
#: the request's chat_template_kwargs ask for it, which deepseek_v3 reads)
REASONING = ["deepseek_r1", "qwen3", "deepseek_v3", "deepseek_v3 thinking"]


def template_kwargs(parser: str) -> dict[str, Any] | None:
    return {"thinking": True} if parser.endswith(" thinking") else None


@pytest.fixture(scope="module")
def thinking() -> Any:
    """TEXT's byte-level tokenizer (made here, no download) with the reasoning parsers'
    markers, ``<think>`` and ``</think>``, as tokens of their own (ids 2 and 3)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=400,
                                  special_tokens=["<s>", "</s>", THINK, END_THINK],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator([TEXT] * 20 + [TEXT[i:] for i in range(0, len(TEXT), 7)],
                            trainer=trainer)
    made = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    assert made.convert_tokens_to_ids([THINK, END_THINK]) == [2, 3]
    return made


def parser_class(name: str, tokenizer: Any) -> Any:
    """The parser class vLLM's server composes for ``--reasoning-parser name``."""
    from vllm.parser import ParserManager

    return ParserManager.get_parser(reasoning_parser_name=name.split()[0], tokenizer=tokenizer)


def serving_reasoning(name: str, tokenizer: Any, **options: Any) -> Any:
    """A chat server with ``--reasoning-parser name`` (vLLM sets the reasoning tokens'
    details with any reasoning parser)."""
    return serving_chat(parser_cls=parser_class(name, tokenizer),
                        _include_reasoning_tokens_details=True, model_config=None, **options)


#: a choice's answer: its shape (``think``: <think> reasoning </think> content; ``open``: the
#: reasoning without its <think>, as the template opened it; ``unclosed``: <think> and a
#: reasoning never closed; ``plain``: content alone), its reasoning and content token ids,
#: where its steps are cut, its finish
Plan = tuple[str, list[int], list[int], set[int], str]


def reasoning_script(tokenizer: Any, plans: list[Plan], *, prompt: str, k: int | None,
                     seed: int, parser: str = "") -> Script:
    """A Script (its outputs made as Script makes them) of one choice a plan, each step's
    text the decoded text of its ids, markers included, as a reasoning server's detokenizer
    writes them (``prompt``: ``open`` ends the prompt with <think>, ``closed`` with a
    reasoning already closed; ``parser``: its chat_template_kwargs are the request's)."""
    rng = random.Random(seed)
    vocab = len(tokenizer)
    tail = {"plain": [], "open": [2], "closed": [2, 7, 3]}[prompt]
    prompt_ids = [rng.randrange(4, vocab) for _ in range(3)] + tail
    answers = []
    for shape, reasoning, content, cuts, finish in plans:
        body = [4 + i % (vocab - 4) for i in reasoning]
        answer = [4 + i % (vocab - 4) for i in content]
        ids = {"think": [2, *body, 3, *answer], "open": [*body, 3, *answer],
               "unclosed": [2, *body], "plain": answer}[shape]
        answers.append((ids, cuts, finish))
    return ids_script(tokenizer, answers, prompt_ids=prompt_ids, k=k, rng=rng,
                      chat_template_kwargs=template_kwargs(parser))


def ids_script(tokenizer: Any, answers: list[tuple[list[int], set[int], str]], *,
               prompt_ids: list[int], k: int | None, rng: random.Random,
               chat_template_kwargs: Any = None) -> Script:
    """A Script of one choice an answer (its token ids, where its steps are cut, its
    finish), each step's text the decoded text of its ids, special tokens included, as a
    parser's server detokenizes them (skip_special_tokens false)."""
    vocab = len(tokenizer)
    script = object.__new__(Script)
    script.chat_template_kwargs = chat_template_kwargs  # type: ignore[attr-defined]
    script.tokenizer, script.vocab = tokenizer, vocab
    script.n, script.prompts, script.k, script.odd, script.flat = len(answers), 1, k, None, \
        False
    script.prompt_ids = [prompt_ids]
    script.cached = rng.choice([None, 0, 3])
    script.steps, script.draws = {}, {}
    for c, (ids, cuts, finish) in enumerate(answers):
        bounds = [0, *sorted(cut for cut in cuts if 0 < cut < len(ids)), len(ids)]
        pieces = [ids[a:b] for a, b in zip(bounds, bounds[1:], strict=False)] or [[]]
        steps, draws = [], []
        for s, piece in enumerate(pieces):
            last = s == len(pieces) - 1
            stop = rng.choice([None, "\n", 2]) if last and finish == "stop" else None
            steps.append((piece, tokenizer.decode(piece, skip_special_tokens=False),
                          finish if last else None, stop))
            rows_ids, rows_lp, ranks = [], [], []
            for sampled in piece:
                top = [rng.randrange(vocab) for _ in range((k or 1) - 1)]
                rows_ids.append([sampled, *top])
                rows_lp.append(sorted((rng.uniform(-9, 0) for _ in range(k or 1)),
                                      reverse=True))
                ranks.append(rng.randint(1, 9))
            draws.append((rows_ids, rows_lp, ranks))
        script.steps[0, c], script.draws[0, c] = steps, draws
    queues = {key: list(range(len(v))) for key, v in script.steps.items()}
    script.order = []
    while queues:
        key = rng.choice(sorted(queues))
        script.order.append((*key, queues[key].pop(0)))
        if not queues[key]:
            del queues[key]
    return script


REASONING_REQUESTS = [
    {},
    {"stream_options": {"include_usage": True}},
    {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"return_token_ids": True, "stream_options": {"include_usage": False,
                                                  "continuous_usage_stats": True}},
    {"logprobs": True, "top_logprobs": 2},
    {"n": 2, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"n": 3, "logprobs": True, "top_logprobs": 1, "return_token_ids": True},
    {"include_reasoning": False, "logprobs": True, "return_token_ids": True,
     "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"include_reasoning": False, "n": 2},
]

_ids = st.lists(st.integers(0, 10**6), max_size=5)
_plans = st.tuples(st.sampled_from(["think", "open", "unclosed", "plain"]), _ids, _ids,
                   st.sets(st.integers(1, 12), max_size=6), st.sampled_from(["stop", "length"]))


@pytest.mark.parametrize("request_", REASONING_REQUESTS, ids=repr)
@pytest.mark.parametrize("parser", REASONING)
@given(plans=st.lists(_plans, min_size=3, max_size=3),
       prompt=st.sampled_from(["plain", "open", "closed"]), seed=st.integers(0, 2**16),
       fingerprint=st.sampled_from([None, "fp_3e1"]))
def test_reasoning_bytes(thinking: Any, parser: str, request_: dict[str, Any],
                         fingerprint: str | None, plans: list[Plan], prompt: str,
                         seed: int) -> None:
    """A server with a reasoning parser: each choice's answer reasoning then content, content
    alone, a reasoning never closed, its steps cut anywhere (a marker alone, a marker with
    the text on either side, a step of several tokens), an empty step; the prompt with a
    reasoning open or closed. vLLM's parser objects make the deltas in both generators: the
    same bytes, the same usage (its reasoning tokens)."""
    n = request_.get("n", 1)
    script = reasoning_script(thinking, plans[:n], prompt=prompt, seed=seed,
                              k=_k(request_, True), parser=parser)
    same(run_chat, serving_reasoning(parser, thinking, system_fingerprint=fingerprint),
         request_, script)


@pytest.mark.parametrize("request_", [
    {}, {"return_token_ids": True, "stream_options": {"include_usage": True,
                                                      "continuous_usage_stats": True}}],
    ids=repr)
@pytest.mark.parametrize("parser", REASONING)
def test_reasoning_markers_split_at_every_point(thinking: Any, monkeypatch: pytest.MonkeyPatch,
                                                parser: str, request_: dict[str, Any]) -> None:
    """<think> a b </think> c d, cut in every way (each of the 32 ways to cut 6 tokens into
    steps), three shapes: the same bytes as vLLM's; and the writer writes the steps, vLLM's
    models at most two a stream, the deltas that are not one text of one kind (deepseek_r1's
    step that closes the reasoning; with token ids, the <think> step's ``"delta":{}``)."""
    from tokcore.plugins import _vllm_fallback

    calls: list[int] = []
    step = _vllm_fallback.chat_step
    monkeypatch.setattr(_vllm_fallback, "chat_step",
                        lambda *args, **kwargs: calls.append(1) or step(*args, **kwargs))
    ours = theirs = 0
    for shape in ("think", "open", "unclosed"):
        for cuts in range(32):
            plan = (shape, [10, 11], [12, 13], {b for b in range(1, 6) if cuts >> (b - 1) & 1},
                    "stop")
            script = reasoning_script(thinking, [plan], prompt="plain", k=None, seed=cuts,
                                      parser=parser)
            calls.clear()
            body = same(run_chat, serving_reasoning(parser, thinking), request_, script)
            assert len(calls) <= 2, (shape, cuts)
            ours += body.count(b"data: ") - 2 - len(calls)  # (the role chunk, [DONE])
            theirs += len(calls)
    assert theirs * 2 < ours, (theirs, ours)


def test_reasoning_parsers_covered(thinking: Any) -> None:
    """deepseek_r1, deepseek_v3 and qwen3 with no tool parser: the plugin's generator;
    another reasoning parser (kimi_k2), a tool parser beside one, a parser class that is not
    vLLM's composition, no tokenizer: vLLM's own."""
    from vllm.parser.abstract_parser import DelegatingParser

    from tokcore.plugins import _vllm_coverage as coverage

    ctx = patch.installed()
    assert ctx is not None
    plan: Plan = ("think", [10, 11], [12], {2, 4}, "stop")
    script = reasoning_script(thinking, [plan], prompt="plain", k=None, seed=0)
    for name in REASONING:
        cls = parser_class(name, thinking)
        assert coverage.parser_covered(ctx, cls)
        with_tools = type("_Parser", (DelegatingParser,), {
            "reasoning_parser_cls": cls.reasoning_parser_cls, "tool_parser_cls": object})
        assert not coverage.parser_covered(ctx, with_tools)
        overridden = type("_Parser", (DelegatingParser,), {
            "reasoning_parser_cls": cls.reasoning_parser_cls, "tool_parser_cls": None,
            "parse_delta": DelegatingParser.parse_delta})
        assert not coverage.parser_covered(ctx, overridden)
        assert not coverage.parser_covered(ctx, type("_Sub", (cls,), {}))
        serving = serving_reasoning(name, thinking)
        request = ChatCompletionRequest.model_validate(
            {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True})
        assert coverage.chat_covered(ctx, serving, request, "r", MODEL, [], thinking)
        assert not coverage.chat_covered(ctx, serving, request, "r", MODEL, [], None)
    same(run_chat, serving_chat(parser_cls=parser_class("kimi_k2", thinking),
                                _include_reasoning_tokens_details=True, model_config=None),
         {"stream_options": {"include_usage": True}}, script, covered=False)
    # (vLLM's reasoning tokens' details without a parser: not a server vLLM makes)
    same(run_chat, serving_chat(_include_reasoning_tokens_details=True), {}, script,
         covered=False)


@pytest.mark.parametrize("parser", REASONING)
def test_a_parser_that_cannot_be_made(tokenizer: Any, parser: str) -> None:
    """A reasoning parser whose markers the tokenizer has not (its class composed without
    the server's check): deepseek_r1's raises when it is made, before the first step, and
    the stream is vLLM's error chunk and [DONE]; qwen3's is made and reads the answer as
    vLLM's does."""
    from vllm.parser import ParserManager

    cls = ParserManager.get_parser(reasoning_parser_name=parser.split()[0], tokenizer=None)
    serving = serving_chat(parser_cls=cls, _include_reasoning_tokens_details=True,
                           model_config=None)
    script = Script(random.Random(3), tokenizer, n=2, prompts=1, logprobs=None)
    script.chat_template_kwargs = template_kwargs(parser)  # type: ignore[attr-defined]
    raises = parser in ("deepseek_r1", "deepseek_v3 thinking")
    body = same(run_chat, serving, {"n": 2, "stream_options": {"include_usage": True}},
                script, error=raises or None)
    assert not raises or body.count(b"data: ") == 2, body


@pytest.mark.parametrize("parser", REASONING)
def test_reasoning_with_odd_steps(thinking: Any, parser: str) -> None:
    """A reasoning server's stream with a step whose logprobs the writer has no frame for,
    an error finish, kv_transfer_params on the finish (0.33 on): vLLM's bytes."""
    steps = [(0, [{"index": 0, "text": THINK, "ids": [2]}]),
             (0, [{"index": 0, "text": "ab", "ids": [10, 11]}]),
             (0, [{"index": 0, "text": END_THINK + "c", "ids": [3, 12]}]),
             (0, [{"index": 0, "text": "d", "ids": [13], "finish": "stop"}])]
    for _, outputs in steps:
        outputs[0]["logprobs"] = _logprobs(outputs[0]["ids"], missing=True)
    request = {"logprobs": True, "top_logprobs": 1, "return_token_ids": True}
    script = Steps(thinking, steps, kv_transfer_params={"do_remote_prefill": True})
    script.chat_template_kwargs = template_kwargs(parser)  # type: ignore[attr-defined]
    same(run_chat, serving_reasoning(parser, thinking, system_fingerprint="fp"), request,
         script)
    steps[-1][1][0]["finish"] = "error"
    script = Steps(thinking, steps)
    script.chat_template_kwargs = template_kwargs(parser)  # type: ignore[attr-defined]
    same(run_chat, serving_reasoning(parser, thinking), request, script, error=True)


# --- tool parsers: vLLM's own parser objects, their tool-call deltas written by the plugin

TOOL_CALL, END_TOOL_CALL, PYTHON_TAG = "<tool_call>", "</tool_call>", "<|python_tag|>"
#: the tool parsers the plugin writes the deltas of (vLLM's names; "+ qwen3": beside that
#: reasoning parser, as Qwen3's recipe runs them)
TOOLS = ["hermes", "llama3_json", "hermes + qwen3"]


def tools_covered(parser: str) -> bool:
    """Whether the plugin writes a tool parser's streams on this release (all of TOOLS on
    each release it knows)."""
    return RULES is not None


TOOL_DEFS = [{"type": "function", "function": {
    "name": name, "description": "d", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "n": {"type": "integer"}},
        "required": ["city"]}}} for name in ("get_weather", "get_time")]


@pytest.fixture(scope="module")
def tooling() -> Any:
    """TEXT's byte-level tokenizer (made here, no download) with the parsers' markers as
    tokens of their own: <think>, </think> (ids 2, 3), <tool_call>, </tool_call> (hermes's:
    4, 5), <|python_tag|> (llama3_json's: 6)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    markers = [THINK, END_THINK, TOOL_CALL, END_TOOL_CALL, PYTHON_TAG]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=500, special_tokens=["<s>", "</s>", *markers],
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    calls = '{"name": "get_weather", "arguments": {"city": "Paris", "n": 2}}; ' * 3
    tok.train_from_iterator([TEXT] * 20 + [calls] * 20 +
                            [TEXT[i:] for i in range(0, len(TEXT), 7)], trainer=trainer)
    made = PreTrainedTokenizerFast(tokenizer_object=tok, bos_token="<s>", eos_token="</s>")
    assert made.convert_tokens_to_ids(markers) == [2, 3, 4, 5, 6]
    return made


def tool_parser_class(name: str, tokenizer: Any) -> Any:
    """The parser class vLLM's server composes for ``--enable-auto-tool-choice
    --tool-call-parser name`` (and ``--reasoning-parser`` after a ``+``)."""
    from vllm.parser import ParserManager

    tool, _, reasoning = name.partition(" + ")
    return ParserManager.get_parser(tool_parser_name=tool, reasoning_parser_name=reasoning or None,
                                    enable_auto_tools=True, tokenizer=tokenizer)


def serving_tools(name: str, tokenizer: Any, **options: Any) -> Any:
    """A chat server with ``--enable-auto-tool-choice --tool-call-parser name``."""
    return serving_chat(parser_cls=tool_parser_class(name, tokenizer), enable_auto_tools=True,
                        _include_reasoning_tokens_details=" + " in name, model_config=None,
                        **options)


def _call(name: str, arguments: str, parser: str, choice: Any) -> str:
    """A tool call as the parser's model writes it: hermes's <tool_call> JSON, llama3_json's
    JSON (its first one after <|python_tag|>), the array tool_choice required asks for, the
    arguments alone for a named tool_choice."""
    if choice == "required":
        return f'{{"name": "{name}", "parameters": {arguments}}}'
    if isinstance(choice, dict):
        return arguments
    if parser.startswith("hermes"):
        return f'{TOOL_CALL}\n{{"name": "{name}", "arguments": {arguments}}}\n{END_TOOL_CALL}'
    return f'{{"name": "{name}", "arguments": {arguments}}}'


def tool_answer(parser: str, choice: Any, parts: list[tuple[str, str]]) -> str:
    """An answer's text from its parts: ("text", words), ("call", arguments JSON, possibly
    cut short: an unclosed call when last)."""
    calls = [arguments for kind, arguments in parts if kind == "call"]
    texts = [words for kind, words in parts if kind == "text"]
    if choice == "required":
        return "[" + ", ".join(_call(("get_weather", "get_time")[k % 2], a, parser, choice)
                               for k, a in enumerate(calls or ['{"city": "Oslo"}'])) + "]"
    if isinstance(choice, dict):
        return calls[0] if calls else '{"city": "Oslo"}'
    out = []
    for k, (kind, value) in enumerate(parts):
        if kind == "text":
            out.append(value)
        else:
            out.append(_call(("get_weather", "get_time")[k % 2], value, parser, choice))
    text = ("; " if parser.startswith("llama3_json") else "").join(out)
    if parser.startswith("llama3_json") and calls and parts[0][0] == "call":
        text = PYTHON_TAG + text
    return text if texts or calls else "Nothing."


TOOL_CHOICES: list[Any] = ["auto", "required",
                           {"type": "function", "function": {"name": "get_weather"}}, "none"]
TOOL_REQUESTS = [
    {},
    {"stream_options": {"include_usage": True}},
    {"stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"return_token_ids": True, "logprobs": True, "top_logprobs": 2},
    {"n": 2, "stream_options": {"include_usage": True, "continuous_usage_stats": True}},
    {"n": 3, "logprobs": True, "top_logprobs": 1, "return_token_ids": True},
    {"parallel_tool_calls": False},
]

_words = st.sampled_from(["Sure.", "The weather: é \"x\" \\ 🙂", " ", "a\nb", "<tool",
                          "{not json", "Done"])
_arguments = st.sampled_from(['{"city": "Paris"}', '{"city": "Pa\\"ris é", "n": 2}', "{}",
                              '{"city": "Oslo", "n": [1, {"x": null}]}', '{"city": "Par'])
_parts = st.lists(st.one_of(st.tuples(st.just("text"), _words),
                            st.tuples(st.just("call"), _arguments)), min_size=1, max_size=4)


def tool_script(tokenizer: Any, texts: list[str], cuts: list[set[int]], *, k: int | None,
                seed: int, finish: list[str], parser: str = "") -> Script:
    """A Script of one choice a text (its token ids cut into steps where ``cuts`` say)."""
    rng = random.Random(seed)
    vocab = len(tokenizer)
    answers = []
    for text, cut, end in zip(texts, cuts, finish, strict=False):
        ids = tokenizer.encode(text, add_special_tokens=False)
        answers.append((ids, {c % (len(ids) + 1) for c in cut}, end))
    return ids_script(tokenizer, answers, prompt_ids=[rng.randrange(7, vocab) for _ in range(3)],
                      k=k, rng=rng, chat_template_kwargs=None)


@pytest.mark.parametrize("request_", TOOL_REQUESTS, ids=repr)
@pytest.mark.parametrize("choice", TOOL_CHOICES, ids=repr)
@pytest.mark.parametrize("parser", TOOLS)
@given(answers=st.lists(_parts, min_size=3, max_size=3),
       cuts=st.lists(st.sets(st.integers(1, 60), max_size=30), min_size=3, max_size=3),
       finish=st.lists(st.sampled_from(["stop", "length"]), min_size=3, max_size=3),
       seed=st.integers(0, 2**16), fingerprint=st.sampled_from([None, "fp_3e1"]))
def test_tool_bytes(tooling: Any, parser: str, choice: Any, request_: dict[str, Any],
                    fingerprint: str | None, answers: list[list[tuple[str, str]]],
                    cuts: list[set[int]], finish: list[str], seed: int) -> None:
    """A server with a tool parser, tools in the request: answers of text, tool calls (one,
    several, text after one, a call never closed, arguments cut short), cut into steps
    anywhere (a marker across two steps, a name or its arguments across many), with
    tool_choice auto, required, a named function and none (the calls written, as vLLM's
    parser passes them, as content). vLLM's parser objects make the deltas in both
    generators: the same bytes (but the random tool call ids), the same usage."""
    n = request_.get("n", 1)
    texts = [tool_answer(parser, choice, parts) for parts in answers[:n]]
    script = tool_script(tooling, texts, cuts, k=_k(request_, True), seed=seed, finish=finish)
    same(run_chat, serving_tools(parser, tooling, system_fingerprint=fingerprint),
         {"tools": TOOL_DEFS, "tool_choice": choice, **request_}, script,
         covered=tools_covered(parser))


@pytest.mark.parametrize("request_", [
    {}, {"return_token_ids": True, "stream_options": {"include_usage": True,
                                                      "continuous_usage_stats": True}}],
    ids=repr)
@pytest.mark.parametrize("choice", TOOL_CHOICES, ids=repr)
@pytest.mark.parametrize("parser", TOOLS)
def test_tool_calls_split_at_every_point(tooling: Any, monkeypatch: pytest.MonkeyPatch,
                                         parser: str, choice: Any,
                                         request_: dict[str, Any]) -> None:
    """Text, two calls and text after them: every token its own step, every two tokens one
    step, each single cut: the same bytes as vLLM's; and the writer writes most steps, vLLM's
    models the deltas its frames have not (a call's name with its first arguments, text
    beside a call)."""
    from tokcore.plugins import _vllm_fallback

    calls: list[int] = []
    step = _vllm_fallback.chat_step
    monkeypatch.setattr(_vllm_fallback, "chat_step",
                        lambda *args, **kwargs: calls.append(1) or step(*args, **kwargs))
    text = tool_answer(parser, choice, [("text", "Sure."), ("call", '{"city": "Pa\\"ris"}'),
                                        ("call", '{"city": "Oslo", "n": 2}'),
                                        ("text", " Done")])
    size = len(tooling.encode(text, add_special_tokens=False))
    every = set(range(1, size))
    ways = [every, *({c} for c in every), *(every - {c} for c in every)]
    ours = theirs = 0
    for seed, cuts in enumerate(ways):
        script = tool_script(tooling, [text], [cuts], k=None, seed=seed, finish=["stop"])
        calls.clear()
        body = same(run_chat, serving_tools(parser, tooling),
                    {"tools": TOOL_DEFS, "tool_choice": choice, **request_}, script,
                    covered=tools_covered(parser))
        ours += body.count(b"data: ") - 2 - len(calls)  # (the role chunk, [DONE])
        theirs += len(calls)
        if cuts == every and choice == "auto" and parser != "llama3_json":
            assert b'"finish_reason":"tool_calls"' in body or b'"finish_reason":"stop"' in body
    assert theirs * 4 < ours or not tools_covered(parser), (theirs, ours)


def test_tool_parsers_covered(tooling: Any) -> None:
    """hermes and llama3_json (0.32 and 0.33: its legacy class), alone or beside a covered
    reasoning parser: the plugin's generator; another tool parser (pythonic), a class that
    is not vLLM's composition, no tokenizer: vLLM's own. A named tool_choice's stream on a
    server without a tool parser is plain content, the plugin's too."""
    from vllm.parser.abstract_parser import DelegatingParser

    from tokcore.plugins import _vllm_coverage as coverage

    ctx = patch.installed()
    assert ctx is not None
    request = ChatCompletionRequest.model_validate(
        {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True,
         "tools": TOOL_DEFS, "tool_choice": "required"})
    for name in TOOLS:
        cls = tool_parser_class(name, tooling)
        assert coverage.parser_covered(ctx, cls) == tools_covered(name)
        if not tools_covered(name):
            continue
        assert not coverage.parser_covered(ctx, type("_Sub", (cls,), {}))
        overridden = type("_Parser", (DelegatingParser,), {
            "reasoning_parser_cls": None, "tool_parser_cls": cls.tool_parser_cls,
            "parse_delta": DelegatingParser.parse_delta})
        assert not coverage.parser_covered(ctx, overridden)
        serving = serving_tools(name, tooling)
        assert coverage.chat_covered(ctx, serving, request, "r", MODEL, [], tooling)
        assert not coverage.chat_covered(ctx, serving, request, "r", MODEL, [], None)
    text = tool_answer("hermes", "auto", [("text", "a"), ("call", '{"city": "Paris"}')])
    script = tool_script(tooling, [text], [{2, 5, 9}], k=None, seed=0, finish=["stop"])
    same(run_chat, serving_tools("pythonic", tooling), {"tools": TOOL_DEFS}, script,
         covered=False)
    same(run_chat, serving_chat(), {"tools": TOOL_DEFS, "tool_choice": TOOL_CHOICES[2]},
         script)


# --- the release, the fingerprint and the switch

def test_this_release_is_known() -> None:
    """This vLLM is a release the plugin knows: every target's source and pydantic-core's
    release are its row's, each target is where the row says (absent where it says absent),
    and the probe chunks come out the same both ways."""
    assert RELEASE is not None, releases.detect(releases.fingerprint())[2]
    found = releases.fingerprint(patch.originals())
    assert found == RELEASE.digests
    for target in targets.TARGETS:
        item = names.resolve(target.name)
        assert (isinstance(item, str) and item == names.ABSENT) == \
            (RELEASE.digests[targets.short(target.name)] == names.ABSENT), target.name
    ctx = patch.installed()
    assert ctx is not None and ctx.release is RELEASE
    assert shapes.probes(ctx) == []
    assert len(shapes._chat(ctx)) + len(shapes._completion(ctx)) >= 12


def test_the_shapes_are_the_builtin_ones_on_0_32() -> None:
    """On 0.32 the frames built from vLLM's models are the stream writer's built-in
    ``"vllm"`` shapes' probes, byte for byte (the built-in shapes were read from 0.32's
    sources); on a later release they differ where its rules say."""
    from tokcore.writer._writer_builtin import builtin

    ctx = patch.installed()
    assert ctx is not None
    for api, made in (("chat", shapes._chat_probes), ("completions", shapes._completion_probes)):
        ours = made(ctx.names, ctx.release.rules)
        theirs = builtin(api, "vllm")[0]
        for frame, probe in ours.items():
            if api == "completions" and frame == "usage":  # (no reasoning: none written)
                continue
            if not RULES.kv_transfer_params:
                assert probe == theirs[frame], (api, frame)
            elif frame != "usage":
                assert (',"kv_transfer_params":null}' in probe) == (frame != "start"), probe


def test_the_registry_names_what_the_plugin_uses() -> None:
    """Every patch is a target, replaced or wrapped, with its why, how, what it reproduces
    and what would retire it; every name the plugin's code uses (``_vllm_names.Names``) is a
    target or the class of one; the names are unique."""
    by_name = {target.name: target for target in targets.TARGETS}
    assert len(by_name) == len(targets.TARGETS)
    assert len({targets.short(name) for name in by_name}) == len(by_name)
    for item in targets.PATCHES:
        assert by_name[item.target].role in ("replaced", "wrapped"), item.target
        assert item.why and item.how and item.retire and item.reproduces
        assert all(name in by_name for name in item.reproduces), item.reproduces
    objects = {}
    for target in targets.TARGETS:
        found = names.resolve(target.name)
        objects[id(getattr(found, "__func__", found))] = target.name
        owner = target.name.partition(":")[2].split(".")[0]
        if "." in target.name.partition(":")[2]:
            objects[id(names.resolve(f"{target.name.partition(':')[0]}:{owner}"))] = owner
    loaded = names.load()
    for field in loaded._fields:
        value = getattr(loaded, field)
        if field.endswith("_serving"):  # (the generators' modules)
            continue
        if field == "OpenAIServingChat":  # (the replaced generator's class: patched now)
            assert value is OpenAIServingChat
            continue
        assert id(value) in objects, field


def test_the_sources_tool(tmp_path: Any) -> None:
    """tools/vllm_sources.py writes every target present here with its digest (the plugin's
    row's) and agrees with the plugin's row (--check)."""
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent.parent
    env = {"PYTHONPATH": str(root), "PATH": "/usr/bin:/bin"}
    tool = str(root / "tools" / "vllm_sources.py")
    done = subprocess.run([sys.executable, tool, "--out", str(tmp_path)], capture_output=True,
                          text=True, env=env, check=True)
    folder = Path(done.stdout.strip().splitlines()[-1])
    assert folder == tmp_path / RELEASE.name
    rows = [line.split("\t") for line in (folder / "INDEX.tsv").read_text().splitlines()[1:]]
    assert len(rows) == len(targets.TARGETS)
    for name, _, _, _, _, digest in rows:
        assert RELEASE.digests[targets.short(name)] == digest, name
        assert (folder / f"{targets.short(name)}.py").exists() == (digest != names.ABSENT)
    done = subprocess.run([sys.executable, tool, "--check"], capture_output=True, text=True,
                          env=env, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([sys.executable, tool, "--table"], capture_output=True, text=True,
                          env=env, check=True)
    assert f'"{RELEASE.name}": Release("{RELEASE.name}", Rules(...)' in done.stdout


@pytest.fixture
def uninstalled(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
                ) -> Iterator[Callable[..., list[str]]]:
    """The plugin uninstalled for the test, and installed again after it once its patches
    are undone. The test calls the function given to try an install that must be refused: it
    returns the install's WARNING lines."""
    patch.uninstall()
    monkeypatch.setattr(patch, "_REFUSED", [])

    def install() -> list[str]:
        caplog.clear()
        with caplog.at_level("WARNING", "tokcore.plugins.vllm"):
            assert not patch.install()
        assert not patch._REPLACED and patch.installed() is None  # (vLLM untouched)
        return [r.getMessage() for r in caplog.records if r.name == "tokcore.plugins.vllm"]

    yield install
    monkeypatch.undo()
    assert patch.install()


def _owner(name: str) -> tuple[Any, str]:
    """Where a target is defined: its class or module, and its attribute there."""
    module, _, qualname = name.partition(":")
    if "." in qualname:
        owner, attribute = qualname.rsplit(".", 1)
        return names.resolve(f"{module}:{owner}"), attribute
    return importlib.import_module(module), qualname


def _changed(original: Any) -> Any:
    """Another version of a vLLM function or class: its name, the same behaviour, another
    source (as a vLLM release that changed it would have it)."""
    if isinstance(original, type):
        class Changed(original):  # type: ignore[misc, valid-type]
            changed: ClassVar[bool] = True

        Changed.__qualname__ = original.__qualname__
        return Changed
    function = getattr(original, "__func__", original)

    def changed(*args: Any, **kwargs: Any) -> Any:
        return function(*args, **kwargs)

    changed.__qualname__ = function.__qualname__
    if isinstance(original, classmethod):
        return classmethod(changed)
    return staticmethod(changed) if isinstance(original, staticmethod) else changed


PRESENT = [t.name for t in targets.TARGETS if RELEASE is not None and
           RELEASE.digests[targets.short(t.name)] != names.ABSENT]


@pytest.mark.parametrize("name", PRESENT, ids=targets.short)
def test_a_changed_source_refuses(monkeypatch: pytest.MonkeyPatch, uninstalled: Any,
                                  name: str) -> None:
    """Each target changed (as a release that changed it would have it): the plugin stays
    off, and its one WARNING line names this release as the closest and the target as what
    differs."""
    owner, attribute = _owner(name)
    monkeypatch.setattr(owner, attribute, _changed(vars(owner)[attribute]))
    lines = uninstalled()
    assert len(lines) == 1 and lines[0].endswith("off, vLLM's own streams"), lines
    assert f"closest {RELEASE.name}, from which these differ: {targets.short(name)}): " \
        in lines[0], lines


def test_a_missing_target_refuses(monkeypatch: pytest.MonkeyPatch, uninstalled: Any) -> None:
    """A target gone (as a release that removed it): named, absent here."""
    monkeypatch.delattr(LogprobsProcessor, "_verify_tokens")
    lines = uninstalled()
    assert "differ: LogprobsProcessor._verify_tokens (absent here)): " in lines[0], lines


def test_another_pydantic_core_refuses(monkeypatch: pytest.MonkeyPatch,
                                       uninstalled: Any) -> None:
    import pydantic_core

    monkeypatch.setattr(pydantic_core, "__version__", "2.99.0")
    lines = uninstalled()
    assert len(lines) == 1 and "pydantic-core 2.99.0 (checked: 2.50.5)" in lines[0], lines


def test_one_line_names_every_difference(monkeypatch: pytest.MonkeyPatch,
                                         uninstalled: Any) -> None:
    """Several differences: one WARNING line names them all, and another install that finds
    the same writes none."""
    import pydantic_core

    monkeypatch.setattr(pydantic_core, "__version__", "2.99.1")
    monkeypatch.setattr(LogprobsProcessor, "_verify_tokens",
                        _changed(LogprobsProcessor._verify_tokens))
    lines = uninstalled()
    assert len(lines) == 1, lines
    assert "differ: LogprobsProcessor._verify_tokens, pydantic-core 2.99.1 (checked: " \
        "2.50.5)): " in lines[0], lines
    assert uninstalled() == []


def test_an_unknown_release_is_off(monkeypatch: pytest.MonkeyPatch, uninstalled: Any) -> None:
    """This release's row gone (as a vLLM the plugin does not know yet): off, the line names
    the closest known release and what differs from it; the switch's register() leaves
    vLLM's streams as they are."""
    others = {name: row for name, row in releases.RELEASES.items() if name != RELEASE.name}
    monkeypatch.setattr(releases, "RELEASES", others)
    lines = uninstalled()
    assert len(lines) == 1 and f"is not a release it knows ({', '.join(others)}; closest " \
        in lines[0], lines
    monkeypatch.setenv(plugin.SWITCH, "1")
    plugin.register()
    assert plugin.mode() == "off"


def _serialized(cls: Any, member: str) -> Any:
    """The model with a serializer of its own for ``member`` (its value as text)."""
    import pydantic

    class Serialized(cls):  # type: ignore[misc, valid-type]
        @pydantic.field_serializer(member)
        def _text(self, value: Any) -> Any:
            return str(value)

    Serialized.__name__ = Serialized.__qualname__ = cls.__name__
    return Serialized


def _reordered(cls: Any, first: str) -> Any:
    """The model with its member ``first`` moved to the front."""
    import pydantic

    fields = {first: cls.model_fields[first]} | dict(cls.model_fields)
    return pydantic.create_model(cls.__name__, __config__=cls.model_config, **{
        name: (field.annotation, field) for name, field in fields.items()})


def test_a_model_changed_where_it_is_defined_refuses(monkeypatch: pytest.MonkeyPatch,
                                                      uninstalled: Any) -> None:
    """A chunk model changed in its own module (as a release would change it): the
    fingerprint names it."""
    module = importlib.import_module(targets.CHAT_PROTOCOL)
    monkeypatch.setattr(module, "ChatCompletionStreamResponse",
                        _reordered(module.ChatCompletionStreamResponse, "model"))
    lines = uninstalled()
    assert "differ: ChatCompletionStreamResponse): " in lines[0], lines


@pytest.mark.parametrize("api", ["chat", "completions"])
def test_a_model_that_writes_a_member_its_own_way_refuses(
        monkeypatch: pytest.MonkeyPatch, uninstalled: Any, api: str) -> None:
    """A chunk model, where vLLM's generators find it, that writes a member its own way
    (``created`` as text): the shapes built from it keep what it wrote of the probe's
    sentinel, so the probe chunks differ both ways, and the one line names them."""
    module = names.load().chat_serving if api == "chat" else names.load().completion_serving
    cls = "ChatCompletionStreamResponse" if api == "chat" else "CompletionStreamResponse"
    monkeypatch.setattr(module, cls, _serialized(getattr(module, cls), "created"))
    lines = uninstalled()
    assert len(lines) == 1 and "are not the stream writer's: " in lines[0], lines
    assert f" {api} " in lines[0].split("writer's: ")[1], lines


def test_a_reordered_model_is_followed(monkeypatch: pytest.MonkeyPatch, tokenizer: Any
                                       ) -> None:
    """A chunk model, where vLLM's generators find it, with its members in another order:
    the shapes are built from it, so the plugin's streams are still vLLM's bytes."""
    patch.uninstall()
    chat = names.load().chat_serving
    monkeypatch.setattr(chat, "ChatCompletionStreamResponse", _reordered(
        chat.ChatCompletionStreamResponse, "model"))
    try:
        assert patch.install()
        for seed in range(3):
            script = Script(random.Random(seed), tokenizer, n=2, prompts=1, logprobs=3)
            body = same(run_chat, serving_chat(system_fingerprint="fp"),
                        {"n": 2, "logprobs": True, "top_logprobs": 2}, script)
            assert body.startswith(b'data: {"model":"model/\xc3\xa9","id":')
    finally:
        patch.uninstall()
        monkeypatch.undo()
        assert patch.install()


@pytest.mark.parametrize(("value", "on", "warns"), [
    ("", False, False), ("0", False, False), ("1", True, False), ("generator", True, False),
    ("dump", False, True), ("yes", False, True)])
def test_the_switch(monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture,
                    value: str, on: bool, warns: bool) -> None:
    patch.uninstall()
    monkeypatch.setenv(plugin.SWITCH, value)
    try:
        with caplog.at_level("INFO", "tokcore.plugins.vllm"):
            plugin.register()
            plugin.register()  # (again: nothing more)
        assert (vars(OpenAIServingChat)["chat_completion_stream_generator"] is not CHAT) == on
        assert (vars(OpenAIServingCompletion)["completion_stream_generator"] is not
                COMPLETION) == on
        assert (vars(LogprobsProcessor)["from_new_request"] is not NEW_REQUEST) == on
        assert [r.levelname for r in caplog.records] == ["WARNING"] * 2 * warns
        if value == "dump":
            assert "the dump mode is gone" in caplog.records[0].getMessage()
        assert plugin.mode() == ("generator" if on else "off")
    finally:
        plugin.uninstall()
        assert plugin.mode() == "off"
        assert patch.install()


def test_the_rust_frontend_is_named(monkeypatch: pytest.MonkeyPatch,
                                    caplog: pytest.LogCaptureFixture) -> None:
    """VLLM_USE_RUST_FRONTEND: vLLM's Rust process serves the API; the plugin says in one INFO
    line that it changes nothing there (installed all the same: the Python processes are
    vLLM's engine's)."""
    patch.uninstall()
    monkeypatch.setenv(plugin.SWITCH, "1")
    monkeypatch.setenv("VLLM_USE_RUST_FRONTEND", "1")
    try:
        with caplog.at_level("INFO", "tokcore.plugins.vllm"):
            plugin.register()
        assert [r.levelname for r in caplog.records] == ["INFO"]
        assert "VLLM_USE_RUST_FRONTEND" in caplog.records[0].getMessage()
    finally:
        plugin.uninstall()
        assert patch.install()
