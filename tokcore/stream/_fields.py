"""The data fields of an event and the usage edits made through them (shared by both twins).

The usage JSON of an event is its data as the WHATWG rules build it: the values of its
``data`` fields joined with ``\\n``. These helpers find those values, run the usage edits on
the joined data and make the edits in the event's own bytes, so field names, line ends and
other lines stay. Both relay twins call them for the rare cases (usage spread over several
``data`` fields; a usage value held out of an event too large to hold), so both give the same
bytes.
"""

from __future__ import annotations

from ._dialects import NONE, REWRITTEN
from ._events_py import BOM, LINE_ENDS
from ._usage_py import Edit, Rules, apply_edits, object_edits, text_edits

Span = tuple[int, int]

_COLON = 0x3A


def data_fields(event: bytes, bom: bool) -> list[Span]:
    """The byte spans of the values of an event's ``data`` fields, in order.

    ``event`` holds whole lines (an unterminated last line is not a field yet).
    """
    spans: list[Span] = []
    begin = 3 if bom and event.startswith(BOM) else 0
    for match in LINE_ENDS.finditer(event, begin):
        line_end = match.start()
        if event.startswith(b"data", begin, line_end):
            rest = begin + 4
            if rest == line_end:
                spans.append((rest, rest))  # "data" alone: an empty value
            elif event[rest] == _COLON:
                rest += 1
                if rest < line_end and event[rest] == 0x20:
                    rest += 1
                spans.append((rest, line_end))
        begin = match.end()
    return spans


def rewrite_event(event: bytes, bom: bool, rules: Rules) -> tuple[int, bytes | None]:
    """``(outcome, bytes)``: a complete event with its usage rewritten, or None for the
    bytes when it goes out as it came.

    The usage JSON is looked for in the event's data as the WHATWG rules build it: the
    values of its ``data`` fields joined with ``\\n``. An edit that spans several data
    fields (only a replaced value that runs over lines can) puts its text where it starts
    and removes the rest of the old value from the following fields; field names, line ends
    and other lines stay.
    """
    spans = data_fields(event, bom)
    if not spans:
        return NONE, None
    if len(spans) == 1:
        start, end = spans[0]
        outcome, edits = text_edits(event[start:end], rules)
        if outcome != REWRITTEN:
            return outcome, None
        return outcome, apply_edits(event, edits, start)
    joined = b"\n".join(event[s:e] for s, e in spans)
    outcome, edits = text_edits(joined, rules)
    if outcome != REWRITTEN:
        return outcome, None
    return outcome, apply_edits_to_fields(event, spans, edits)


def apply_edits_to_fields(event: bytes, spans: list[Span], edits: list[Edit]) -> bytes:
    """Edits of the joined data made in the event: data offset ``offset`` of a field is at
    event offset ``start``; a joiner (the ``\\n`` between two fields) is never an edit's
    first or last byte, but a replaced value may run over it."""
    pieces, copied = [], 0
    for edit_start, edit_end, text in edits:
        offset, placed = 0, False
        for start, end in spans:
            length = end - start
            if edit_start == edit_end:  # an insertion
                if offset <= edit_start <= offset + length:
                    at = start + edit_start - offset
                    pieces.append(event[copied:at])
                    pieces.append(text)
                    copied = at
                    break
            else:
                cut_start = max(edit_start, offset)
                cut_end = min(edit_end, offset + length)
                if cut_start < cut_end:
                    pieces.append(event[copied:start + cut_start - offset])
                    if not placed:
                        pieces.append(text)
                        placed = True
                    copied = start + cut_end - offset
            offset += length + 1
    pieces.append(event[copied:])
    return b"".join(pieces)




def rewrite_value(held: bytes, rules: Rules) -> tuple[int, bytes]:
    """``(outcome, bytes)`` for a usage value held raw out of an event's bytes: from its
    ``{`` (in a ``data`` value) to its ``}``, with whatever lines came between.

    Prefixed with ``data:`` and ended with a line end, the held bytes are an event whose
    joined data is exactly the value (it starts with ``{``, so no optional space is taken);
    the edits are made through its fields and the prefix and line end taken off again.
    """
    event = b"data:" + held + b"\n"
    spans = data_fields(event, False)
    joined = b"\n".join(event[s:e] for s, e in spans)
    outcome, edits = object_edits(joined, 0, len(joined), rules)
    if outcome != REWRITTEN:
        return outcome, held
    return outcome, apply_edits_to_fields(event, spans, edits)[5:-1]
