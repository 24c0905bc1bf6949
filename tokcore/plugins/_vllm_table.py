"""The table of token texts: each id's text as vLLM's logprobs processor decodes it alone,
made once per tokenizer and vocabulary (the vLLM plugin's tabled logprobs processor reads
it, ``_vllm_processor``)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["TokenTable", "table", "vocabulary_size"]


class TokenTable:
    """Each token id's text as vLLM's logprobs processor decodes it alone
    (``convert_ids_list_to_tokens(tokenizer, [id])``, the ``convert`` given), made once per
    tokenizer and vocabulary (:func:`table`): an id's text is decoded the first time it is
    met, then looked up. ``partial`` holds the ids met whose text ends in U+FFFD (a piece of
    a character: vLLM corrects those from the context); an id is added there before its text
    is stored, so a reader on another thread that finds the text finds the id partial too."""

    __slots__ = ("_convert", "_texts", "_tokenizer", "corrected", "partial")

    #: at most this many corrected texts are kept (then the memo starts again)
    MAX_CORRECTED = 1 << 16

    def __init__(self, tokenizer: Any, convert: Callable[[Any, list[int]], list[str]]) -> None:
        self._tokenizer = tokenizer
        self._convert = convert
        self._texts: dict[int, str] = {}
        self.partial: set[int] = set()
        #: vLLM's correction of a partial token's text (``_correct_decoded_token``), by the
        #: id and the sampled ids before it (at most 4: all that function reads)
        self.corrected: dict[tuple[int, ...], str] = {}

    def __len__(self) -> int:
        return len(self._texts)

    def texts(self, ids: Sequence[int]) -> list[str]:
        """The ids' texts (a new list)."""
        texts = self._texts
        try:
            return [texts[i] for i in ids]
        except KeyError:
            missing = list(dict.fromkeys(i for i in ids if i not in texts))
            for i, text in zip(missing, self._convert(self._tokenizer, missing), strict=True):
                if text.endswith("\ufffd"):
                    self.partial.add(i)  # (first: the text is read before the mark)
                texts[i] = text
            return [texts[i] for i in ids]


#: the tables, by the tokenizer's id: (the tokenizer, its vocabulary's size, its table)
_TABLES: dict[int, tuple[Any, int, TokenTable]] = {}


def vocabulary_size(tokenizer: Any) -> int:
    """How many tokens the tokenizer has now, added tokens included: its backend's count (a
    Hugging Face fast tokenizer's, which vLLM's cached copy shares while it freezes its own
    ``len()``), else ``len(tokenizer)``."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        return int(backend.get_vocab_size(with_added_tokens=True))
    return len(tokenizer)


def table(tokenizer: Any, convert: Callable[[Any, list[int]], list[str]]) -> TokenTable:
    """The table of this tokenizer and its vocabulary as it is now, its texts made by
    ``convert`` (vLLM's ``convert_ids_list_to_tokens``): made the first time it is asked
    for, and again once the vocabulary has grown (``add_tokens``), so that no text is kept
    from before. A tabled processor asks once, at its first step."""
    size = vocabulary_size(tokenizer)
    found = _TABLES.get(id(tokenizer))
    if found is None or found[0] is not tokenizer or found[1] != size:
        if len(_TABLES) >= 16:
            _TABLES.clear()
        found = _TABLES[id(tokenizer)] = (tokenizer, size, TokenTable(tokenizer, convert))
    return found[2]
