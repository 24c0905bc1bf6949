"""vLLM's engine front end in this process, for ``make test-vllm``: vLLM's own
``AsyncLLM.generate`` and ``add_request``, its ``OutputProcessor`` (each request's
``RequestState``, logprobs processor and detokenizer made by vLLM's ``from_new_request``) and
its output handler task, on an engine core that answers from a script instead of a model.

:func:`engine` makes an ``AsyncLLM`` without its ``__init__`` (which would start an engine
process), with the attributes these methods read; requests go in as ``EngineCoreRequest``
(``generate``'s path that takes a request made already). The engine core stand-in answers
each request it is given, step by step, with one sampled token a step and its top logprobs
(``LogprobsLists`` of numpy arrays, as vLLM's engine sends them), drawn from a generator
seeded by the request's prompt, id and seed (a choice of ``n > 1``: the seed plus its index):
the same request gets the same answer every time.
"""

from __future__ import annotations

import asyncio
import random
import time
from types import SimpleNamespace
from typing import Any

import numpy as np
from vllm.sampling_params import RequestOutputKind, SamplingParams
from vllm.v1.engine import EngineCoreOutput, EngineCoreOutputs, EngineCoreRequest
from vllm.v1.engine.async_llm import AsyncLLM
from vllm.v1.engine.output_processor import OutputProcessor
from vllm.v1.outputs import LogprobsLists

#: how many tokens each request is answered with
STEPS = 6


class _Core:
    """The engine core: each added request answered with ``STEPS`` steps, one an output of
    ``get_output_async`` (vLLM's output handler pulls them)."""

    def __init__(self, vocab: int) -> None:
        self.vocab = vocab
        self.resources = SimpleNamespace(engine_dead=False)
        self.outputs: asyncio.Queue[EngineCoreOutputs] = asyncio.Queue()
        self.tasks: set[asyncio.Task[None]] = set()

    async def add_request_async(self, request: EngineCoreRequest) -> None:
        task = asyncio.get_running_loop().create_task(self._answer(request))
        self.tasks.add(task)
        task.add_done_callback(self.tasks.discard)

    async def _answer(self, request: EngineCoreRequest) -> None:
        params = request.sampling_params
        assert params is not None
        # (a child of n > 1 has the parent's external id and its own seed: the seed + its
        # index)
        rng = random.Random(f"{request.prompt_token_ids}{request.external_req_id}"
                            f"{params.seed}")
        top = params.logprobs or 0
        for step in range(STEPS):
            await asyncio.sleep(0)
            sampled = rng.randrange(self.vocab)
            logprobs = None
            if params.logprobs is not None:
                ids = [sampled, *(rng.randrange(self.vocab) for _ in range(top))]
                if top and rng.random() < 0.5:
                    ids[1] = sampled  # (greedy: the sampled id is the top one too)
                values = [rng.uniform(-3, 0), *sorted((rng.uniform(-9, 0) for _ in range(top)),
                                                      reverse=True)]
                logprobs = LogprobsLists(np.array([ids], dtype=np.int32),
                                         np.array([values], dtype=np.float32),
                                         np.array([rng.randint(1, 9)], dtype=np.int64), None)
            last = step == STEPS - 1
            self.outputs.put_nowait(EngineCoreOutputs(outputs=[EngineCoreOutput(
                request_id=request.request_id, new_token_ids=[sampled], new_logprobs=logprobs,
                finish_reason=_length() if last else None)], timestamp=time.monotonic()))

    async def get_output_async(self) -> EngineCoreOutputs:
        return await self.outputs.get()

    async def abort_requests_async(self, request_ids: list[str]) -> None:
        pass

    def shutdown(self, timeout: float | None = None) -> None:
        pass


def _length() -> Any:
    from vllm.v1.engine import FinishReason

    return FinishReason.LENGTH


def engine(tokenizer: Any) -> Any:
    """An ``AsyncLLM`` of this process, on the engine core stand-in (call it inside the
    event loop that runs its requests)."""
    llm = object.__new__(AsyncLLM)
    config = SimpleNamespace(
        cache_config=SimpleNamespace(kv_sharing_fast_prefill=False),
        # (0.34 on: admission checks fault tolerance first)
        parallel_config=SimpleNamespace(enable_fault_tolerance=False),
        watermark_config=None, _check_supports_watermarking=lambda params: False)
    vars(llm).update(
        engine_core=_Core(len(tokenizer)), vllm_config=config,
        observability_config=SimpleNamespace(otlp_traces_endpoint=None),
        input_processor=SimpleNamespace(
            vllm_config=config, assign_request_id=_assign,
            resolve_watermarking=lambda params: False,
            apply_watermarking=lambda params, on: None),
        output_processor=OutputProcessor(tokenizer, log_stats=False),
        output_handler=None, log_stats=False, logger_manager=None, log_requests=False,
        renderer=SimpleNamespace(mm_processor_cache=None, stat_mm_cache=lambda: None,
                                 shutdown=lambda: None),
        scheduler_config=SimpleNamespace(max_num_queued_reqs=None, max_num_queued_tokens=None),
        admission_stats=None)
    return llm


def _assign(request: EngineCoreRequest) -> None:
    from vllm.v1.engine.input_processor import InputProcessor

    InputProcessor.assign_request_id(request)


def request(request_id: str, prompt: list[int], *, logprobs: int | None, n: int = 1,
            stream: bool = True) -> EngineCoreRequest:
    """An engine request of ``prompt``'s ids, as vLLM's serving code asks for it."""
    params = SamplingParams(n=n, logprobs=logprobs, max_tokens=STEPS, seed=0,
                            output_kind=RequestOutputKind.DELTA if stream else
                            RequestOutputKind.FINAL_ONLY)
    return EngineCoreRequest(request_id=request_id, prompt_token_ids=list(prompt),
                             mm_features=None, sampling_params=params, pooling_params=None,
                             arrival_time=time.time(), lora_request=None, cache_salt=None,
                             data_parallel_rank=None)


async def stop(llm: Any) -> None:
    """The output handler task ended (the loop is about to close)."""
    if llm.output_handler is not None:
        llm.output_handler.cancel()
        await asyncio.gather(llm.output_handler, return_exceptions=True)
