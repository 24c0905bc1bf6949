"""``compact_ids``: pickle the token-id attributes of a class as int32 bytes.

A serving stack pickles request objects (broadcast to data-parallel ranks, IPC to workers)
that carry tens of thousands of token ids; pickle writes one opcode and one int object per id.
With ``@compact_ids("prompt_token_ids")`` the attribute travels as a single bytes object
(``pack_ids``) and comes back as a ``list[int]`` (``unpack_ids``). With
``@compact_ids("prompt_token_ids", lazy=True)`` it comes back *held*: the object keeps the
int32 bytes and builds the list on the attribute's first read, so a process that only
forwards the object, or hands the ids to C++ (``ids_buffer``), never makes an int.

How it works. The decorator gives the class a ``__getstate__`` that takes the state the class
would have pickled anyway (its own ``__getstate__``, or the default one: ``__dict__`` and
``__slots__`` values) and replaces each named value that is a flat list or tuple of int32s by
a ``_CompactIds`` marker. A marker pickles as a call: ``_ids_from_int32(<bytes>)`` for an
eager name, which the unpickler turns back into a list *before* any ``__setstate__`` runs (so
the receiving class, even an undecorated one, only ever sees plain lists), or
``_held_ids_from_int32(<bytes>)`` for a lazy name, which makes a ``_HeldIds`` placeholder
that only wraps the bytes. Those calls, references to private functions of this module, are
the markers in the pickle stream; no user value pickles like them. The decorator also gives
the class a ``__setstate__`` (wrapping the class's own, if any) that resolves markers left in
a state that never went through pickle (``copy.copy``) and installs placeholders.

Laziness. A lazy name gets a data descriptor on the class (``_lazy``, a Cython twin and a
Python one): ``LazyAttr`` for an attribute kept in the instance ``__dict__``, ``LazySlot``
(wrapping the slot's member descriptor) for a ``__slots__`` attribute. The placeholder sits
where the list would be, in the same dict position or slot; the descriptor's first read
unpacks it and puts the list in its place (under a lock, so concurrent first reads all
return one list), and assignment and ``del`` work on that same place. An instance
``__dict__`` that holds a placeholder is a ``_LazyDict``, a dict whose Python-level reads
(``vars(obj)[name]``, ``items()``, ``dict(...)``, ``==``, ``repr``, ``copy``) see the list,
not the placeholder. While the decorator's ``__getstate__`` runs (and while ``ids_buffer``
reads), reads of that object's held values give the placeholders themselves ("raw mode", per
thread), so pickling it again sends the held bytes as they are.

What travels compact: a value whose type is exactly ``list`` or ``tuple`` and whose items
``pack_ids`` accepts, as int32 bytes when they all fit int32, else as int64 bytes (through
``_ids_from_int64`` / ``_held_ids_from_int64``) when they fit int64, and a held placeholder.
Anything else travels unchanged, as pickle would send it: ``None``, nested lists, numpy
arrays, ``array.array``, list subclasses, lists with an item outside int64 or not an
integer. Compact values come
back as a ``list`` of plain ints: a tuple comes back as a list, and ``bool`` or numpy integer
items as the ints they index to. A compact list is sent by value: if the same list object is
also referenced from elsewhere in what is pickled, the unpickled copies are two distinct
lists.

State shapes the decorator understands: a dict (attribute name -> value), the default
``(dict or None, slots dict)`` pair, and the field-value list of a frozen ``slots=True``
dataclass. A class whose own ``__getstate__`` returns anything else still pickles exactly
as before, without the compaction. Pickles made before the class was decorated still load.

Where each part lives: ``_compact`` has the public decorator and ``ids_buffer``;
``_held`` the pickle format's values (markers, the ``_HeldIds`` placeholder, the two
unpickling functions, named ``tokcore.pickling.<name>`` in every pickle); ``_state`` the
state compaction and resolution; ``_raw`` raw mode and first reads; ``_dict`` ``_LazyDict``;
``_layout`` the descriptors put on a class and the per-type layout of its lazy names.
"""

from __future__ import annotations

from ._compact import compact_ids, ids_buffer

# The pickle format: every compact pickle calls these by the names
# tokcore.pickling._ids_from_int32 and tokcore.pickling._held_ids_from_int32 (the int64
# ones for ids outside int32), so they stay importable here whatever module defines them
# (tests/pickling/test_release.py loads pickles written before the package was split).
from ._held import _held_ids_from_int32 as _held_ids_from_int32
from ._held import _held_ids_from_int64 as _held_ids_from_int64
from ._held import _ids_from_int32 as _ids_from_int32
from ._held import _ids_from_int64 as _ids_from_int64

__all__ = ["compact_ids", "ids_buffer"]
