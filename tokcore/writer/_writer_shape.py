"""Stream shapes: each frame of a server's stream as a template, compiled from a probe.

A probe is the server's own serialized frame, made with the sentinel values of
``_writer_rules.PROBE`` where the writer is to put its values. The compiler reads it as JSON
(keeping every byte of it), finds the sentinels and turns the frame into a program of ops
(``_writer_rules``): the bytes between the sentinels are written as they came, so member
order, spacing and whatever members the server's models have stay the server's. A member
whose value may be None is guarded (written ``null``, or left out with ``omit_none``); the
lists that hold a logprob sentinel are written once per token (and per top logprob).
Built-in shapes are probes too (``_writer_builtin``). Not hot: a shape is made once per
server; both writers run its programs.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Collection, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, NamedTuple

from ._writer_rules import (
    APIS,
    CONSTANT_SLOTS,
    DONE_FRAME,
    FRAMES,
    GROUP,
    LEVEL,
    NULLABLE,
    OP_CONST,
    OP_LOOP,
    OP_MEMBER,
    OP_NEXT,
    OP_SLOT,
    PROBE,
    SLOT,
    STYLES,
    TYPED_EVENTS,
    USAGE_SLOTS,
    Style,
    WriterApi,
)

if TYPE_CHECKING:
    Op = tuple[object, ...]

#: a probe's sentinels by their JSON text: strings by their value, numbers by their text,
#: int lists by their one item's text
_STR_SENTINELS = {value: name for name, value in PROBE._asdict().items() if isinstance(value, str)}
_NUM_SENTINELS = {repr(value): name for name, value in PROBE._asdict().items()
                  if isinstance(value, (int, float)) and not isinstance(value, bool)}
#: the stream's ``created`` written as a float (the openai package's Response models have a
#: float ``created_at``): the writer writes it as that float
_FLOAT_SENTINELS = {repr(float(PROBE.created)): "created"}
_LIST_SENTINELS = {str(value[0]): name for name, value in PROBE._asdict().items()
                   if isinstance(value, tuple)}


class Program(NamedTuple):
    """One frame's compiled template."""

    #: the ops (``_writer_rules``: OP_*), jumps by index into this tuple
    ops: tuple[Op, ...]
    #: what the probe writes between list items (``,``, or json.dumps' ``, ``): the writer
    #: writes its int lists with it
    sep: bytes
    #: the slots it writes (a set of slot names, groups included)
    slots: frozenset[str]
    #: it writes the stream's sequence number (Responses), which counts each such frame
    counts: bool
    #: its probe wrote the stream's ``created`` as a float (``1732000000.0``)
    float_created: bool = False
    #: the slots not ``NULLABLE`` that may be None here: their member is left out (the
    #: ``text`` of a finish frame named in ``omit_none``: vLLM's ``"delta":{}``)
    omitted: frozenset[str] = frozenset()


class _Node:
    """A JSON value of a probe: its kind (``{``, ``[``, ``"``, ``0`` for a number, ``l`` for
    a literal), its span in the probe's text, and its items (an object's are (key, value)
    pairs)."""

    __slots__ = ("kind", "start", "end", "items", "members", "value", "parent", "sentinel",
                 "loop", "as_float")

    def __init__(self, kind: str, start: int) -> None:
        self.kind = kind
        self.start = start
        self.end = start
        self.items: list[_Node] = []  # an array's
        self.members: list[tuple[_Node, _Node]] = []  # an object's (key, value) pairs
        self.value = ""
        self.parent: _Node | None = None
        self.sentinel: str | None = None  # the slot this node is, if a sentinel
        self.loop = 0  # the level this array's item (object's member) is written for
        self.as_float = False  # an int sentinel written as a float (created)


class _Reader:
    """A JSON text read into ``_Node`` trees with spans (the probe is checked by
    ``json.loads`` first, so this reader only has to be right on valid JSON)."""

    def __init__(self, text: str) -> None:
        self.t = text
        self.i = 0

    def space(self) -> None:
        t, i = self.t, self.i
        while i < len(t) and t[i] in " \t\r\n":
            i += 1
        self.i = i

    def value(self) -> _Node:
        self.space()
        t, start = self.t, self.i
        c = t[start]
        if c == "{":
            node = _Node("{", start)
            self.i += 1
            self.space()
            members: list[tuple[_Node, _Node]] = []
            if t[self.i] != "}":
                while True:
                    self.space()
                    key = self.value()
                    self.space()
                    self.i += 1  # the colon
                    value = self.value()
                    key.parent = value.parent = node
                    members.append((key, value))
                    self.space()
                    if t[self.i] == ",":
                        self.i += 1
                        continue
                    break
            self.i += 1  # the brace
            node.members = members
        elif c == "[":
            node = _Node("[", start)
            self.i += 1
            self.space()
            items: list[_Node] = []
            if t[self.i] != "]":
                while True:
                    item = self.value()
                    item.parent = node
                    items.append(item)
                    self.space()
                    if t[self.i] == ",":
                        self.i += 1
                        continue
                    break
            self.i += 1
            node.items = items
        elif c == '"':
            node = _Node('"', start)
            i = start + 1
            while t[i] != '"':
                i += 2 if t[i] == "\\" else 1
            self.i = i + 1
            node.value = json.loads(t[start:self.i])
        else:
            node = _Node("0" if c in "-0123456789" else "l", start)
            i = start
            while i < len(t) and t[i] not in ",]} \t\r\n":
                i += 1
            self.i = i
            node.value = t[start:i]
        node.end = self.i
        return node


def _walk(node: _Node) -> Iterable[_Node]:
    yield node
    for key, value in node.members:
        yield from _walk(key)
        yield from _walk(value)
    for item in node.items:
        yield from _walk(item)


def _mark(node: _Node, where: str) -> None:
    """Name the sentinel each node is, if any; a sentinel inside a longer string is an
    error (the writer could not put its value there)."""
    if node.kind == '"':
        name = _STR_SENTINELS.get(node.value)
        if name is None and "<<" in node.value:
            for text in _STR_SENTINELS:
                if text in node.value:
                    raise ValueError(f"{where}: the sentinel {text!r} is inside the string "
                                     f"{node.value!r}: a sentinel must be a whole value")
        node.sentinel = name
    elif node.kind == "0":
        node.sentinel = _NUM_SENTINELS.get(node.value)
        if node.sentinel is None and node.value in _FLOAT_SENTINELS:
            node.sentinel = _FLOAT_SENTINELS[node.value]
            node.as_float = True
    elif node.kind == "[" and len(node.items) == 1 and node.items[0].kind == "0":
        node.sentinel = _LIST_SENTINELS.get(node.items[0].value)


def _levels(node: _Node, where: str) -> set[int]:
    """The logprob levels of the sentinels under ``node`` that no list under it repeats
    yet; sets ``loop`` on the arrays (objects) whose item (member) is repeated per token
    (level 1) or per top logprob (level 2): the innermost level first."""
    if node.sentinel is not None:
        return {LEVEL[node.sentinel]} if node.sentinel in LEVEL else set()
    if node.kind == "[":
        found = [_levels(item, where) for item in node.items]
        free: set[int] = set().union(*found)
        if not free:
            return free
        if len(node.items) != 1:
            raise ValueError(f"{where}: a list with a logprob sentinel must hold exactly one "
                             f"item (one token's logprob, one top logprob)")
        return _bind(node, free, where)
    if node.kind == "{":
        free = set()
        for key, value in node.members:
            inner = _levels(value, where)
            if key.sentinel is not None:  # a member per top logprob, keyed by its token
                if len(node.members) != 1:
                    raise ValueError(f"{where}: an object keyed by a sentinel must have no "
                                     f"other member")
                return _bind(node, inner | {LEVEL[key.sentinel]}, where)
            free |= inner
        return free
    return set()


def _bind(node: _Node, free: set[int], where: str) -> set[int]:
    """``node`` repeats its item per item of the innermost level free in it; a list of top
    logprobs is one token's, so what holds it is repeated per token."""
    level = max(free)
    node.loop = level
    return (free - {level}) | ({1} if level == 2 else set())


def _separator(root: _Node, text: str) -> str:
    """What the probe writes between the items of a list (or members of an object): ``,``
    of a compact serializer, ``, `` of json.dumps' default."""
    for node in _walk(root):
        if len(node.items) >= 2:
            return text[node.items[0].end:node.items[1].start]
        if len(node.members) >= 2:
            return text[node.members[0][1].end:node.members[1][0].start]
    return ","


class _Compiler:
    def __init__(self, text: str, where: str, omit: Callable[[str], bool],
                 omit_text: bool = False) -> None:
        self.t = text
        self.where = where
        self.omit = omit
        self.omit_text = omit_text  # the text's member is left out when None
        self.omitted: set[str] = set()
        self.ops: list[list[object]] = []
        self.pos = 0
        self.barrier = 0  # ops before this index are closed: no constant joins them
        self.roots: dict[int, str] = {}  # id(node) -> group name, for the group roots
        self.lifted: set[int] = set()  # sentinels guarded by the member that holds them
        self.sep = ","

    def flush(self, upto: int) -> None:
        if upto > self.pos:
            piece = self.t[self.pos:upto].encode("utf-8")
            if len(self.ops) > self.barrier and self.ops[-1][0] == OP_CONST:
                self.ops[-1][1] = self.ops[-1][1] + piece  # type: ignore[operator]
            else:
                self.ops.append([OP_CONST, piece])
        self.pos = max(self.pos, upto)

    def guard(self, value: _Node) -> str | None:
        """The slot or group a member's value stands for, when it may be None: a group's
        root, a nullable sentinel, or an object whose one member is a nullable sentinel
        (``"prompt_tokens_details":{"cached_tokens":C}``: None makes the member ``null``)."""
        if id(value) in self.roots:
            return self.roots[id(value)]
        if value.loop == 2:
            return "top_logprobs"
        if value.sentinel in NULLABLE and id(value) not in self.lifted:
            return value.sentinel
        if value.sentinel == "text" and self.omit_text:
            self.omitted.add("text")
            return "text"
        if len(value.members) == 1:
            inner = value.members[0][1]
            if inner.sentinel in NULLABLE and inner.sentinel in USAGE_SLOTS \
                    and id(inner) not in self.roots:
                self.lifted.add(id(inner))
                return inner.sentinel
        return None

    def emit(self, node: _Node) -> None:
        if node.sentinel is not None:
            self.flush(node.start)
            self.ops.append([OP_SLOT, SLOT[node.sentinel]])
            self.pos = node.end
            return
        for item in node.items:
            if node.loop:
                self.repeat(node.loop, item.start, item.end, partial(self.item, item))
            else:
                self.item(item)
        for i, (key, value) in enumerate(node.members):
            if node.loop:
                self.repeat(node.loop, key.start, value.end, partial(self.member, key, value),
                            keyed=True)
                continue
            name = self.guard(value)
            if name is None:
                self.emit(value)
                continue
            omit = name in self.omitted or self.omit(name)
            if i == 0 and omit and len(node.members) > 1:
                raise ValueError(f"{self.where}: the member {key.value!r} cannot be left "
                                 f"out (omit_none): it is its object's first member")
            start = node.members[i - 1][1].end if i else key.start
            self.flush(start)
            op: list[object] = [OP_MEMBER, self.t[start:value.start].encode("utf-8"),
                                GROUP.get(name, SLOT.get(name)), omit,
                                b"[]" if value.kind == "[" and name == "logprobs"
                                else b"null",
                                0]
            self.ops.append(op)
            self.pos = value.start
            self.emit(value)
            self.flush(value.end)
            op[5] = self.barrier = len(self.ops)

    def member(self, key: _Node, value: _Node) -> None:
        self.emit(key)
        self.emit(value)

    def item(self, item: _Node) -> None:
        """A list item; one entry's top logprobs keyed by token (a completions entry's
        ``{token: logprob}``) are ``null`` when the entry has None of them."""
        if item.loop != 2:
            self.emit(item)
            return
        self.flush(item.start)
        op: list[object] = [OP_MEMBER, b"", GROUP["top_logprobs"], False, b"null", 0]
        self.ops.append(op)
        self.emit(item)
        self.flush(item.end)
        op[5] = self.barrier = len(self.ops)

    def repeat(self, level: int, start: int, end: int, body: Callable[[], None],
               keyed: bool = False) -> None:
        self.flush(start)
        loop: list[object] = [OP_LOOP, level, 0, keyed]
        self.ops.append(loop)
        first = len(self.ops)
        body()
        self.flush(end)
        self.ops.append([OP_NEXT, level, first, self.sep.encode("utf-8")])
        loop[2] = self.barrier = len(self.ops)


def _group_root(nodes: list[_Node], all_sentinels: list[_Node]) -> _Node:
    """The node that stands for a group's value (None is written there): the smallest one
    that holds every sentinel of the group, then each enclosing value that holds no other
    sentinel, up to the member of an object that does (or the frame itself)."""
    paths = []
    for node in nodes:
        path = []
        n: _Node | None = node
        while n is not None:
            path.append(n)
            n = n.parent
        paths.append(path[::-1])
    common = None
    for step in zip(*paths):
        if all(n is step[0] for n in step):
            common = step[0]
        else:
            break
    assert common is not None
    root: _Node = common
    others = [s for s in all_sentinels if all(s is not n for n in nodes)]
    while root.parent is not None and root.parent.parent is not None:
        parent = root.parent
        if any(_inside(s, parent) for s in others):
            break
        root = parent
    return root


def _inside(node: _Node, ancestor: _Node) -> bool:
    n: _Node | None = node
    while n is not None:
        if n is ancestor:
            return True
        n = n.parent
    return False


def _split_frame(api: str, text: str, where: str) -> tuple[str, str, str]:
    """(what comes before the JSON, the JSON, what comes after) of a probe: a whole SSE
    frame as the server writes it (its ``event:`` line, ``data: ``, the blank line: each kept
    as it is), or the JSON alone, framed as ``data: <json>\\n\\n`` (with ``event: <type>\\n``
    first for Responses and Messages)."""
    if text.startswith(("data:", "event:", "id:", ":")):
        at = text.find("data:")
        if at < 0 or (at > 0 and text[at - 1] not in "\r\n"):
            raise ValueError(f"{where}: the probe is an SSE frame without a data line")
        begin = at + 5
        if text[begin:begin + 1] == " ":
            begin += 1
        end = begin
        while end < len(text) and text[end] not in "\r\n":
            end += 1
        return text[:begin], text[begin:end], text[end:]
    if api in TYPED_EVENTS:
        try:
            kind = json.loads(text).get("type")
        except (ValueError, AttributeError):
            kind = None
        if not isinstance(kind, str):
            raise ValueError(f"{where}: a {api} probe given as JSON alone needs its \"type\" "
                             f"(the event line's name); or give the whole SSE frame")
        return f"event: {kind}\ndata: ", text, "\n\n"
    return "data: ", text, "\n\n"


def compile_frame(api: str, frame: str, probe: str | bytes, omit: Callable[[str], bool],
                  omit_text: bool = False) -> Program:
    """The program of one frame from its probe (``ValueError`` naming the frame when the
    probe is not one frame of JSON with its sentinels); ``omit_text``: the text's member is
    left out when None (a frame whose text is optional)."""
    where = f"the {frame!r} probe"
    if isinstance(probe, (bytes, bytearray, memoryview)):
        try:
            probe = bytes(probe).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ValueError(f"{where} is not UTF-8: {exc}") from None
    elif not isinstance(probe, str):
        raise TypeError(f"{where} must be str or bytes, not {type(probe).__name__}")
    spec = FRAMES[api][frame]
    head, body, tail = _split_frame(api, probe, where)
    if not body.lstrip(" \t").startswith("{"):  # a constant frame ("[DONE]")
        if spec.required:
            raise ValueError(f"{where}: its data is not a JSON object, so it has none of its "
                             f"sentinels ({', '.join(sorted(spec.required))})")
        return Program(((OP_CONST, probe.encode("utf-8")),), b",", frozenset(), False)
    try:
        json.loads(body)
    except ValueError as exc:
        raise ValueError(f"{where}: its data is not JSON: {exc}") from None
    reader = _Reader(body)
    root = reader.value()
    nodes = list(_walk(root))
    for node in nodes:
        _mark(node, where)
    found: dict[str, _Node] = {}
    for node in nodes:
        if node.sentinel is None:
            continue
        if node.sentinel in found:
            raise ValueError(f"{where}: the sentinel of {node.sentinel} is in it twice")
        found[node.sentinel] = node
    missing = spec.required - found.keys()
    if missing:
        raise ValueError(f"{where} has no sentinel of {', '.join(sorted(missing))} (PROBE."
                         f"{sorted(missing)[0]}): put it where the writer is to write it")
    stray = found.keys() - spec.required - spec.optional - CONSTANT_SLOTS
    if stray:
        raise ValueError(f"{where}: a {frame} frame of {api} has no {', '.join(sorted(stray))}"
                         f" (it may hold {', '.join(sorted(spec.required | spec.optional))})")
    if _levels(root, where):
        raise ValueError(f"{where}: a logprob sentinel outside a list")
    if omit_text and "text" not in spec.optional:
        raise ValueError(f"omit_none: the text of a {frame} frame cannot be left out: it is "
                         f"what the frame writes")
    compiler = _Compiler(body, where, omit, omit_text)
    compiler.sep = _separator(root, body)
    sentinel_nodes = [n for n in nodes if n.sentinel is not None]
    for group, members in (("logprobs", LEVEL), ("usage", USAGE_SLOTS)):
        inside = [n for n in sentinel_nodes if n.sentinel in members]
        if not inside:
            continue
        node = _group_root(inside, sentinel_nodes)
        parent = node.parent
        if parent is None or parent.kind != "{":
            raise ValueError(f"{where}: the {group} must be the value of an object's member")
        compiler.roots[id(node)] = group
    compiler.emit(root)
    compiler.flush(len(body))
    ops = _relocate(compiler.ops, head.encode("utf-8"), tail.encode("utf-8"))
    groups = {name for name in GROUP if _has_group(ops, name)}
    return Program(tuple(ops), compiler.sep.encode("utf-8"), frozenset(found) | frozenset(groups),
                   "sequence_number" in found, "created" in found and found["created"].as_float,
                   frozenset(compiler.omitted))


def _relocate(body_ops: list[list[object]], head: bytes, tail: bytes) -> list[Op]:
    """The frame's ops: the framing joined to the first and last constants, jumps moved by
    the one op the head may add."""
    ops = [list(op) for op in body_ops]
    shift = 0
    if head:
        if ops and ops[0][0] == OP_CONST:
            ops[0][1] = head + ops[0][1]  # type: ignore[operator]
        else:
            ops.insert(0, [OP_CONST, head])
            shift = 1
    if shift:
        for op in ops:
            if op[0] == OP_MEMBER:
                op[5] += shift  # type: ignore[operator]
            elif op[0] == OP_LOOP:
                op[2] += shift  # type: ignore[operator]
            elif op[0] == OP_NEXT:
                op[2] += shift  # type: ignore[operator]
    if tail:
        if ops and ops[-1][0] == OP_CONST:
            ops[-1][1] = ops[-1][1] + tail  # type: ignore[operator]
        else:
            ops.append([OP_CONST, tail])
    return [tuple(op) for op in ops]


def _has_group(ops: list[Op], group: str) -> bool:
    number = GROUP[group]
    return any(op[0] == OP_MEMBER and op[2] == number for op in ops)


def _omit_rule(api: str, omit_none: object) -> tuple[bool, frozenset[str]]:
    """``omit_none``: True (every None member left out, as ``exclude_none``), False (every
    one written ``null``) or the names of the slots and groups (``"usage"``,
    ``"cached_tokens"``) whose member is left out when None, each for every frame or for one
    (``"finish.stop_reason"``); ``"<frame>.text"`` of a frame whose text is optional
    (``"finish.text"``; True does not include it) makes that frame's text optional, its
    member left out when None (vLLM's empty ``"delta":{}``)."""
    if isinstance(omit_none, bool):
        return omit_none, frozenset()
    if isinstance(omit_none, str) or not isinstance(omit_none, Collection):
        raise TypeError(f"omit_none must be a bool or a collection of slot names, not "
                        f"{type(omit_none).__name__}")
    names = set()
    for item in omit_none:
        if not isinstance(item, str):
            raise TypeError(f"omit_none holds a {type(item).__name__}, not a slot name")
        frame, _, name = item.rpartition(".")
        if name == "text" and frame in FRAMES[api] and "text" in FRAMES[api][frame].optional:
            names.add(item)
            continue
        if (name not in NULLABLE and name not in GROUP) or (frame and frame not in FRAMES[api]):
            raise ValueError(f"omit_none: {item!r} is not a slot that may be None ("
                             f"{', '.join(sorted(NULLABLE | GROUP.keys()))}), optionally "
                             f"after a frame name of {api} and a dot; or the text of a frame "
                             f"whose text is optional ('finish.text')")
        names.add(item)
    return False, frozenset(names)


class StreamShape:
    """How one server writes one API's stream: a template per frame, each compiled from a
    probe, and the serializer style its strings and floats are written in.

    ``StreamShape(api, name)`` is a built-in shape: ``"vllm"``, ``"trtllm"``, ``"sglang"`` and
    ``"openai"`` for ``"chat"`` and ``"completions"``, ``"openai"`` for ``"responses"``,
    ``"anthropic"`` for ``"messages"`` (the stream writer's guide has a table of each one's
    frames and the slots each frame writes; ``frames`` lists them).
    ``StreamShape(api, probes, style=..., omit_none=...)`` is a server's own:
    ``probes`` maps frame names (``FRAMES``: ``"text"`` is required) to that server's
    serialized frame made with the sentinels of ``PROBE``, as bytes or str, the whole SSE
    frame (its framing kept) or its JSON alone. ``style`` is the serializer it was written
    with (``"pydantic"`` by default); ``omit_none`` says which members the server leaves out
    when their value is None rather than write ``null``: True (all, as ``exclude_none``), or
    the names of the slots that may be None (``system_fingerprint``, ``finish_reason``,
    ``stop_reason``, ``token_ids``, ``prompt_token_ids``, ``cached_tokens``,
    ``reasoning_tokens``, ``lp_bytes``, ``top_bytes``) and groups (``usage``, ``logprobs``,
    ``top_logprobs``), each for every frame or one (``"finish.stop_reason"``), and
    ``"finish.text"`` (a finish frame's text left out when None: vLLM's ``"delta":{}``).

    A probe's sentinels are checked against its frame: each one the frame requires exactly
    once, the others at most once, none of another frame's. A probe that writes ``created``
    as a float makes the stream's ``created`` a float (an int in one frame and a float in
    another is a ``ValueError``). A top-logprobs object keyed by token (a dict in the
    server's model) writes a token given twice once, where it first came, with its last
    value, as a dict does. Chat Completions and Completions get ``data: [DONE]`` as their
    ``done`` frame unless a probe gives one.

    Raises ``ValueError`` for an unknown API, name, frame or style, and for a probe that is
    not one frame of JSON with its sentinels (the message names the frame and the sentinel);
    ``TypeError`` for arguments of the wrong type.
    """

    __slots__ = ("api", "name", "style", "_programs", "_compiled", "_created_float")
    api: str
    name: str
    style: str
    _programs: dict[str, Program]
    _created_float: bool  # the probes write the stream's created as a float
    _compiled: object  # what the compiled writer made of it, once (_writer_c)

    def __init__(self, api: WriterApi, probes: str | Mapping[str, str | bytes], *,
                 style: Style | None = None, omit_none: bool | Collection[str] = False
                 ) -> None:
        if not isinstance(api, str):
            raise TypeError(f"api must be a str, not {type(api).__name__}")
        if api not in APIS:
            raise ValueError(f"api must be one of {', '.join(map(repr, APIS))}, not {api!r}")
        if isinstance(probes, str):
            from ._writer_builtin import builtin
            if style is not None or omit_none is not False:
                raise TypeError("a built-in shape takes no style or omit_none: its serializer's "
                                "are part of it")
            name = probes
            probes, builtin_style, builtin_omit = builtin(api, name)
            style = builtin_style  # type: ignore[assignment]
            omit_none = builtin_omit  # type: ignore[assignment]
        elif isinstance(probes, Mapping):
            name = "probes"
        else:
            raise TypeError(f"probes must be a built-in shape's name or a mapping of frame "
                            f"names to probes, not {type(probes).__name__}")
        if style is None:
            style = "pydantic"
        if not isinstance(style, str):
            raise TypeError(f"style must be a str, not {type(style).__name__}")
        if style not in STYLES:
            raise ValueError(f"style must be one of {', '.join(map(repr, STYLES))}, not "
                             f"{style!r}")
        every, named = _omit_rule(api, omit_none)
        programs: dict[str, Program] = {}
        for frame, probe in probes.items():
            if not isinstance(frame, str):
                raise TypeError(f"a frame name must be a str, not {type(frame).__name__}")
            if frame not in FRAMES[api]:
                raise ValueError(f"{api} has no frame {frame!r}: its frames are "
                                 f"{', '.join(FRAMES[api])}")

            def omit(slot: str, frame: str = frame) -> bool:
                return every or slot in named or f"{frame}.{slot}" in named

            programs[frame] = compile_frame(api, frame, probe, omit, f"{frame}.text" in named)
        if "text" not in programs:
            raise ValueError("the probes have no 'text' frame (a text delta): every shape has one")
        if api in ("chat", "completions") and "done" not in programs:
            programs["done"] = Program(((OP_CONST, DONE_FRAME),), b",", frozenset(), False)
        floats = {program.float_created for program in programs.values()
                  if "created" in program.slots}
        if len(floats) > 1:
            raise ValueError("the probes write the stream's created both as an int and as a "
                             "float: one serializer writes it one way")
        self.api, self.name, self.style = api, name, style
        self._created_float = floats == {True}
        self._programs = programs
        self._compiled = None

    @property
    def frames(self) -> tuple[str, ...]:
        """The frames this shape writes."""
        return tuple(self._programs)

    def _program(self, frame: str) -> Program:
        """One frame's compiled template (``ValueError`` when the shape has no such frame)."""
        if not isinstance(frame, str):
            raise TypeError(f"frame must be a str, not {type(frame).__name__}")
        frame = str.__str__(frame)  # (a subclass: its text; its hash and == are not run)
        try:
            return self._programs[frame]
        except KeyError:
            raise ValueError(_no_frame(self, frame)) from None

    def __repr__(self) -> str:
        return f"StreamShape({self.api!r}, {self.name!r}, style={self.style!r})"


def _no_frame(shape: StreamShape, frame: object) -> str:
    if isinstance(frame, str) and frame in FRAMES[shape.api]:
        return (f"this {shape.api} shape ({shape.name}) has no {frame!r} frame: give its probe "
                f"to StreamShape (it has {', '.join(shape.frames)})")
    return f"{shape.api} has no frame {frame!r}: its frames are {', '.join(FRAMES[shape.api])}"
