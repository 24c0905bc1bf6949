"""vLLM's stream chunks built as its stream generators build them (vLLM 0.32's
``chat_completion/serving.py`` and ``completion/serving.py``: which members each
construction site sets), for the tests of tokcore.plugins.vllm: with vLLM's own protocol
models (``make test-vllm``) or the vLLM-shaped stand-ins of tests/writer/_writer_oracles.py.

``Models`` names the classes; ``chunks(models, draw)`` draws one stream's chunks and how vLLM
dumps each: ``(chunk, dump options)``.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from hypothesis import strategies as st

TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=8)
IDS = st.none() | st.lists(st.integers(0, 2**31 - 1), max_size=4)
COUNT = st.integers(0, 2**40)


class Models(NamedTuple):
    chat: Any  # ChatCompletionStreamResponse
    choice: Any  # ChatCompletionResponseStreamChoice
    delta: Any  # DeltaMessage
    usage: Any  # UsageInfo
    prompt_details: Any  # PromptTokenUsageInfo
    completion_details: Any  # CompletionTokenUsageInfo
    completion: Any  # CompletionStreamResponse
    completion_choice: Any  # CompletionResponseStreamChoice


Dump = dict[str, bool]
UNSET: Dump = {"exclude_unset": True}


def chat_stream(m: Models, draw: st.DrawFn) -> list[tuple[Any, Dump]]:
    rid, model, created = draw(TEXT), draw(TEXT), draw(st.integers(0, 2**40))
    n = draw(st.integers(1, 2))
    continuous, reasoning_details = draw(st.booleans()), draw(st.booleans())
    fingerprint = draw(st.none() | TEXT)
    include_usage = draw(st.booleans())
    prompt = draw(COUNT)
    base = {"id": rid, "object": "chat.completion.chunk", "created": created, "model": model}

    def usage(completion: int) -> Any:
        return m.usage(prompt_tokens=prompt, completion_tokens=completion,
                       total_tokens=prompt + completion,
                       completion_tokens_details=m.completion_details(
                           reasoning_tokens=draw(COUNT)) if reasoning_details else None)

    out: list[tuple[Any, Dump]] = []
    for i in range(n):
        chunk = m.chat(**base, choices=[m.choice(index=i, delta=m.delta(role="assistant",
                                                                         content=""),
                                                 logprobs=None, finish_reason=None)],
                       prompt_token_ids=draw(IDS), prompt_text=None)
        if continuous:
            chunk.usage = usage(0)
        out.append((chunk, UNSET))
    for step in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, n - 1))
        kind = draw(st.sampled_from(["content", "reasoning", "finish"]))
        token_ids = draw(IDS)
        if kind == "finish":
            choice = m.choice(index=i, delta=m.delta(content=draw(TEXT)), logprobs=None,
                              finish_reason=draw(st.sampled_from(["stop", "length"])),
                              stop_reason=draw(st.none() | st.integers(0, 10**6) | TEXT),
                              token_ids=token_ids)
        else:
            delta = m.delta(content=draw(TEXT)) if kind == "content" else m.delta(
                reasoning=draw(TEXT))
            choice = m.choice(index=i, delta=delta, logprobs=None, finish_reason=None,
                              token_ids=token_ids)
        chunk = m.chat(**base, choices=[choice])
        if not include_usage and fingerprint is not None and choice.finish_reason is not None:
            chunk.system_fingerprint = fingerprint
        if continuous:
            chunk.usage = usage(step + 1)
        out.append((chunk, UNSET))
    if include_usage:
        final = m.usage(prompt_tokens=prompt, completion_tokens=5, total_tokens=prompt + 5,
                        completion_tokens_details=m.completion_details(
                            reasoning_tokens=draw(COUNT)) if reasoning_details else None)
        cached = draw(st.none() | COUNT)
        final.prompt_tokens_details = None if cached is None else m.prompt_details(
            cached_tokens=cached)
        out.append((m.chat(**base, choices=[], usage=final, system_fingerprint=fingerprint,
                           metrics=None), {"exclude_unset": True, "exclude_none": True}))
    return out


def completion_stream(m: Models, draw: st.DrawFn) -> list[tuple[Any, Dump]]:
    rid, model, created = draw(TEXT), draw(TEXT), draw(st.integers(0, 2**40))
    continuous, include_usage = draw(st.booleans()), draw(st.booleans())
    fingerprint = draw(st.none() | TEXT)
    prompt = draw(COUNT)
    prompt_ids = draw(IDS)
    out: list[tuple[Any, Dump]] = []
    steps = draw(st.integers(1, 4))
    for step in range(steps):
        finish = draw(st.sampled_from(["stop", "length"])) if step == steps - 1 else None
        chunk = m.completion(id=rid, object="text_completion", created=created, model=model,
                             choices=[m.completion_choice(
                                 index=0, text=draw(TEXT), logprobs=None, finish_reason=finish,
                                 stop_reason=draw(st.none() | st.integers(0, 10**6) | TEXT),
                                 prompt_token_ids=prompt_ids if step == 0 else None,
                                 token_ids=draw(IDS))])
        if not include_usage and fingerprint is not None and finish is not None:
            chunk.system_fingerprint = fingerprint
        if continuous:
            chunk.usage = m.usage(prompt_tokens=prompt, completion_tokens=step + 1,
                                  total_tokens=prompt + step + 1)
        out.append((chunk, UNSET))
    if include_usage:
        final = m.usage(prompt_tokens=prompt, completion_tokens=steps,
                        total_tokens=prompt + steps)
        cached = draw(st.none() | COUNT)
        if cached is not None:
            final.prompt_tokens_details = m.prompt_details(cached_tokens=cached)
        out.append((m.completion(id=rid, created=created, model=model, choices=[],
                                 usage=final, system_fingerprint=fingerprint, metrics=None),
                    {"exclude_unset": False, "exclude_none": True}))
    return out


def others(m: Models, draw: st.DrawFn) -> list[tuple[Any, Dump]]:
    """Chunks the writer has no frame for (pydantic writes them): a tool call, logprobs,
    an extra member, a dump with other options."""
    base = {"id": draw(TEXT), "object": "chat.completion.chunk", "created": 1, "model": "m"}
    with_logprobs = m.chat(**base, choices=[m.choice(index=0, delta=m.delta(content="a"),
                                                     logprobs={"content": None},
                                                     finish_reason=None, token_ids=None)])
    extra = m.chat(**base, choices=[m.choice(index=0, delta=m.delta(content="a"),
                                             logprobs=None, finish_reason=None,
                                             token_ids=None)], kv_transfer_params={"a": 1})
    return [(with_logprobs, UNSET), (extra, UNSET), (extra, {}),
            (extra, {"exclude_unset": True, "by_alias": True})]
