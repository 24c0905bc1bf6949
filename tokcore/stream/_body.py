"""A whole answer's body (JSON, not an event stream) with its usage rewritten, and what was
done, counted as the relay counts an event's usage: for a server that relays streams and
whole bodies alike and reports one kind of counts (``tokcore.adapters.answer``).

Not a twin pair: it calls the loaded ``rewrite_usage`` (one pass, the common case: a body
whose usage is rewritten) and, only when nothing was rewritten, the Python twin's reading
of the same text for the reason, whose byte pre-filter settles a body with no usage key at
once. (A one-pass reason on the C path wants an entry point of ``_usage_c`` that returns
its outcome; see DESIGN.md.)
"""

from __future__ import annotations

from .._args import Api, BytesLike, payload_bytes
from ._relay_py import OUTCOME_FIELDS, RelayCounts
from ._usage import rewrite_usage
from ._usage_py import make_rules, text_edits

#: the counts of a body whose usage was rewritten, and of one with no usage at all
_REWRITTEN = RelayCounts(rewritten=1)
_NOTHING = RelayCounts()


def rewrite_body(payload: BytesLike, prompt_tokens: int, cached_tokens: int | None = None,
                 *, api: Api = "chat") -> tuple[bytes, RelayCounts]:
    """``rewrite_usage(payload, ...)`` and what it did, counted as a relay counts one
    event's usage (``events`` 0): ``rewritten`` 1; or, the text returned as it came, the
    reason's count 1 (``foreign``, ``not_object``, ``unreadable``), or no count at all (no
    usage, or ``null``).

    Raises what ``rewrite_usage`` raises.
    """
    data = payload_bytes(payload)
    out = rewrite_usage(data, prompt_tokens, cached_tokens, api=api)
    if out is not data:
        return out, _REWRITTEN
    field = OUTCOME_FIELDS.get(text_edits(data, make_rules(prompt_tokens, cached_tokens,
                                                           api))[0])
    if field is None:
        return data, _NOTHING
    counts = [0] * len(RelayCounts._fields)
    counts[field] = 1
    return data, RelayCounts(*counts)
