"""vLLM's logprobs processor for the streams the vLLM plugin writes: the tabled subclass, its
records, and the mark that tells which engine requests are a covered stream's.

vLLM's logprobs processor (the API server's output processor) decodes every top token of
every step alone (``convert_ids_list_to_tokens``: one ``tokenizer.decode([id])`` each). For
the covered requests its sample logprobs take the texts from a :class:`TokenTable` instead;
a text ending in U+FFFD is still corrected from the sampled tokens before it by vLLM's own
code (``_correct_decoded_token``: up to 9 decodes through the tokenizer pool), its result
kept in the table by the id and the (at most 4) sampled ids before it, all that code reads.
The covered requests are told from the others by a mark set in the stream's task only while
it awaits its result generator's first step, where vLLM adds the engine requests
(:func:`mark`): every other engine request of that task, before or after, gets vLLM's own
processor. Each position is kept as a record of what vLLM would build its dict of
``Logprob`` objects from (the ids, logprobs, texts, rank and ``num_logprobs``), read by the
plugin's generators as that dict (:func:`position`) and made into it only for vLLM's own
models (:func:`vllms`).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable, Sequence
from typing import Any

from ._vllm_table import TokenTable, table

__all__ = ["TABLED", "mark", "position", "record_dict", "record_span", "tabled_class",
           "unmark", "vllms"]

#: the requests being added to vLLM's output processor are one stream's of ours (their
#: logprobs processors take their texts from the table): set by ``mark`` while the stream
#: awaits its result generator's first step, where vLLM adds them, and reset before anything
#: else runs in the task (``unmark``)
TABLED: contextvars.ContextVar[bool] = contextvars.ContextVar("tokcore_vllm_tabled",
                                                              default=False)

Append = Callable[..., None]  # vLLM's append_logprobs_for_next_position


def mark() -> contextvars.Token[bool]:
    """Mark the engine requests added from here on in this task as ours (their logprob
    texts from the table), until ``unmark``. A generator marks before it awaits its result
    generator's first step and unmarks as soon as that step is over, however it ends, and
    before it yields anything: vLLM's ``AsyncLLM.generate`` adds its requests at its first
    step (and ``merge_async_iterators``'s tasks, made then, copy the mark for the prompts'
    requests), so the mark covers those requests and nothing else the task runs."""
    return TABLED.set(True)


def unmark(token: contextvars.Token[bool] | None) -> contextvars.Token[bool] | None:
    """The mark ``mark`` set, reset (None: reset already); None, for the caller to keep
    (``token = unmark(token)``)."""
    if token is not None:
        TABLED.reset(token)
    return None


def record_dict(record: tuple[Any, ...], append: Append) -> dict[int, Any]:
    """A position's record as vLLM's processor stores the position: its dict of ``Logprob``
    (``append``: vLLM's own ``append_logprobs_for_next_position``)."""
    made: list[dict[int, Any]] = []
    append(made, *record)
    return made[0]


def vllms(positions: Sequence[Any], append: Append) -> list[Any]:
    """A step's positions as vLLM's models take them (records made vLLM's dicts)."""
    return [record_dict(p, append) if type(p) is tuple else p for p in positions]


def record_span(ids: list[int], num: int) -> tuple[int, int] | None:
    """Where a record's entries lie in its lists, as ``(start, size)``: the dict vLLM's
    ``append_logprobs_for_next_position`` makes holds ``ids[start:size]`` with their values
    in order, where its first ``size`` ids (``1 + num_logprobs`` at most) are distinct
    (start 0) or distinct but for the sampled id repeated as the top one (start 1: vLLM's
    sampler writes the sampled id first, then the top ids, and greedy sampling repeats it;
    the dict's first entry, in the first place, has the second's values). None for any
    other record (a repeat elsewhere: the dict decides)."""
    size = len(ids) if num == -1 or len(ids) <= num + 1 else num + 1
    unique = len(set(ids[:size] if size < len(ids) else ids))
    if unique == size:
        return 0, size
    if unique == size - 1 and ids[0] == ids[1]:
        return 1, size
    return None


def position(found: Any) -> list[tuple[int, float, Any]]:
    """A position's entries as vLLM's dict holds them, in its order: ``(id, logprob,
    decoded text)``. From a record: the dict vLLM's ``append_logprobs_for_next_position``
    would make, without its objects (its ``zip`` cut to the first ``1 + num_logprobs``
    entries; a repeated id keeps its first place and its last values)."""
    if type(found) is not tuple:
        return [(i, entry.logprob, entry.decoded_token) for i, entry in found.items()]
    ids, logprobs, decoded, _, num = found
    span = record_span(ids, num)
    if span is not None:
        start, size = span
        return list(zip(ids[start:size], logprobs[start:], decoded[start:]))
    if num != -1 and len(ids) > num + 1:
        ids = ids[:num + 1]
    return [(i, lp, text) for i, (lp, text) in dict(zip(ids, zip(logprobs, decoded))).items()]


def tabled_class(processor: Any, append: Append,
                 convert: Callable[[Any, list[int]], list[str]]) -> type:
    """vLLM's LogprobsProcessor (``processor``) with the sample logprobs' texts from the
    table of ``convert`` (vLLM's ``convert_ids_list_to_tokens``): its
    ``_update_sample_logprobs`` as vLLM writes it (0.32 to 0.34: the same source), the
    decode replaced. Each position of a list of sample logprobs is kept as a record, ``(ids,
    logprobs, decoded texts, rank, num_logprobs)``: the arguments of vLLM's
    ``append_logprobs_for_next_position`` (``append``), which builds a dict of ``Logprob``
    objects from them that only the plugin's generators read (``position`` reads a record
    as that dict; ``record_dict`` makes the dict for vLLM's models). ``FlatLogprobs`` are
    appended to by vLLM's function."""
    correct = processor._correct_decoded_token

    class TabledLogprobsProcessor(processor):  # type: ignore[misc]
        #: the table of the request's tokenizer, found at its first step (``_table``)
        token_table: TokenTable | None = None

        def _table(self) -> TokenTable:
            found = self.token_table
            if found is None:
                found = self.token_table = table(self.tokenizer, convert)
            return found

        def _correct_decoded_token(self, token_id: int, context_token_ids: list[int]) -> str:
            # vLLM's own correction (a function of the tokenizer, the id and the last 4
            # context ids: up to 4 + 4 + 1 decodes through the tokenizer pool), memoised
            memo = self._table().corrected
            key = (token_id, *context_token_ids[-4:])
            text: str | None = memo.get(key)
            if text is None:
                text = correct(self, token_id, context_token_ids)
                if len(memo) >= TokenTable.MAX_CORRECTED:
                    memo.clear()
                memo[key] = text
            return text

        def _update_sample_logprobs(self, logprobs_lists: Any) -> None:
            token_ids_lst, logprobs_lst, ranks_lst, _ = logprobs_lists
            found = self.token_table
            if found is None:
                found = self._table()
            texts, partial = found.texts, found.partial
            kept = self.logprobs
            records = type(kept) is list
            if getattr(ranks_lst, "ndim", 0) == 1 and getattr(logprobs_lst, "ndim", 0) == \
                    getattr(token_ids_lst, "ndim", 0) == 2:
                # numpy's arrays (as vLLM's engine sends them): their rows' lists from one
                # tolist() each, not three a row (a row's tolist() is its list)
                rows: Any = zip(ranks_lst.tolist(), logprobs_lst.tolist(),
                                token_ids_lst.tolist(), strict=False)
            else:
                rows = ((r.tolist(), lp.tolist(), i.tolist()) for r, lp, i in
                        zip(ranks_lst, logprobs_lst, token_ids_lst, strict=False))
            for rank, logprobs, token_ids in rows:
                decoded = texts(token_ids)
                if not partial.isdisjoint(token_ids):  # (else vLLM's check changes nothing)
                    # the sampled ids of the last 4 positions (each's first key in vLLM)
                    context = [p[0][0] if type(p) is tuple else next(iter(p))
                               for p in kept[-4:] if p is not None] if records else \
                        self._get_sampled_context_ids(kept)
                    decoded = self._verify_tokens(
                        decoded_tokens_list=decoded, tokens=token_ids,
                        context_token_ids=context)
                self.cumulative_logprob += logprobs[0]
                if records and token_ids:
                    kept.append((token_ids, logprobs, decoded, rank, self.num_logprobs))
                else:
                    append(kept, token_ids, logprobs, decoded, rank, self.num_logprobs)

    return TabledLogprobsProcessor
