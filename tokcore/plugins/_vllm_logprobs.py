"""A step's logprobs as the stream writer's entries, as vLLM's ``_create_chat_logprobs`` and
``_create_completion_logprobs`` make them (the same in vLLM 0.32 to 0.34: 0.33 moved their
top-logprob limits into ``chat_top_logprobs_limit`` and ``completion_top_logprobs_limit``,
which keep the same entries for every value)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ._vllm_processor import position as read_position
from ._vllm_processor import record_span

__all__ = ["Odd", "chat_logprobs", "completion_logprobs"]


class Odd(Exception):
    """A step the writer has no frame for: vLLM's models write it (``_vllm_fallback``)."""


def _sampled(items: list[tuple[int, float, Any]], token_id: int
             ) -> tuple[int, float, Any] | None:
    """The sampled token's entry among a position's (vLLM's ``position[token_id]``)."""
    for item in items:
        if item[0] == token_id:
            return item
    return None


def chat_logprobs(token_ids: Sequence[int], positions: Sequence[Any], top: int | None,
                  every: bool, as_ids: bool) -> list[tuple[Any, ...]]:
    """A step's chat logprobs as the writer's entries (vLLM's ``_create_chat_logprobs``);
    ``Odd`` for a position vLLM's models write otherwise than the writer can (none, no
    sampled entry, no decoded text)."""
    entries: list[tuple[Any, ...]] = []
    for k, token_id in enumerate(token_ids):
        position = positions[k]
        if position is None:
            raise Odd
        items = read_position(position)
        sampled = _sampled(items, token_id)
        if sampled is None or sampled[2] is None:
            raise Odd
        _, logprob, decoded = sampled
        tops = []
        for j, (top_id, top_logprob, text) in enumerate(items):
            if not (every or top == -1 or (top is not None and j < top)):
                break
            if as_ids:
                text = f"token_id:{top_id}"
            elif text is None:
                raise Odd
            tops.append((text, max(top_logprob, -9999.0),
                         text.encode("utf-8", errors="replace")))
        entries.append((f"token_id:{token_id}" if as_ids else decoded,
                        max(logprob, -9999.0),
                        decoded.encode("utf-8", errors="replace"), tops))
    return entries


def _record_tops(record: tuple[Any, ...], token_id: int, top: int, every: bool
                 ) -> tuple[float, str, list[tuple[str, float]]] | None:
    """A record's sampled logprob, sampled text and top entries for a completion, as
    ``completion_logprobs`` makes them through ``position``, straight from the record's
    lists where ``record_span`` finds its entries there and the first is the sampled
    token's; None for any other record."""
    ids, logprobs, texts, _, num = record
    span = record_span(ids, num)
    if span is None:
        return None
    start, size = span
    if start == size or ids[start] != token_id:
        return None
    end = size if every or top == -1 or size - start <= top + 1 else start + top + 1
    lps = logprobs[start:end]
    # none below -9999.0: the writer's entries are the record's own (min is nan only where
    # the first is nan: then each clamped as vLLM's max(lp, -9999.0), nan kept)
    if min(lps) >= -9999.0:
        tops = list(zip(texts[start:end], lps))
    else:
        tops = [(text, -9999.0 if lp < -9999.0 else lp)
                for text, lp in zip(texts[start:end], lps)]
    return logprobs[start], texts[start], tops


def completion_logprobs(token_ids: Sequence[int], positions: Sequence[Any], top: int,
                        every: bool, as_ids: bool, offset: int
                        ) -> tuple[list[tuple[Any, ...]], int | None]:
    """A step's completion logprobs as the writer's entries and the next text offset (None:
    no token), as vLLM's ``_create_completion_logprobs`` makes them; ``KeyError`` where
    vLLM's raises it (the sampled token missing), ``Odd`` where vLLM's models write what the
    writer cannot (a position without decoded texts)."""
    entries: list[tuple[Any, ...]] = []
    length = 0
    for k, token_id in enumerate(token_ids):
        position = positions[k]
        if position is None:
            raise Odd
        found = _record_tops(position, token_id, top, every) \
            if type(position) is tuple and not as_ids else None
        if found is not None:
            logprob, token, tops = found
            if k:
                offset += length
            length = len(token)
            entries.append((token, -9999.0 if logprob < -9999.0 else logprob, None, tops,
                            offset))
            continue
        items = read_position(position)
        sampled = _sampled(items, token_id)
        if sampled is None:
            raise KeyError(token_id)  # (vLLM's step_top_logprobs[token_id])
        if not (every or top == -1) and len(items) > top + 1:
            items = items[:top + 1]
        # (-9999.0 if lp < -9999.0 else lp: vLLM's max(lp, -9999.0), nan kept, no call)
        if as_ids:
            token = f"token_id:{token_id}"
            tops = [(f"token_id:{top_id}", -9999.0 if lp < -9999.0 else lp)
                    for top_id, lp, _ in items]
        else:
            token = sampled[2]
            tops = [(text, -9999.0 if lp < -9999.0 else lp) for _, lp, text in items]
            if token is None or (type(position) is not tuple and
                                 any(text is None for text, _ in tops)):
                raise Odd  # (a record's texts are the table's: never None)
        if k:
            offset += length
        length = len(token)
        entries.append((token, -9999.0 if sampled[1] < -9999.0 else sampled[1], None, tops,
                        offset))
    return entries, (offset + length if entries else None)
