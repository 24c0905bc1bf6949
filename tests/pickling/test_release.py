"""Pickles written by an earlier tokcore still load: compact_ids' format is its names.

``release-0.1.0.json`` holds pickles of ``_pickle_release``'s classes made at 0.1.0 (commit
89d78b3), when ``tokcore.pickling`` was one module, in every protocol: eager and lazy
attributes, a slotted class, and an object pickled again with its ids unread. Each pickle
calls ``tokcore.pickling._ids_from_int32`` or ``_held_ids_from_int32`` by name.
"""

from __future__ import annotations

import base64
import json
import pickle
import pickletools
from pathlib import Path
from typing import Any

import pytest
from _pickle_release import EagerRequest, LazyRequest, LazySlots

import tokcore
from tokcore.pickling._compact import _is_held

SAVED = json.loads((Path(__file__).parent / "release-0.1.0.json").read_text())
IDS: list[int] = SAVED["ids"]
PICKLES: dict[str, bytes] = {name: base64.b64decode(text)
                             for name, text in SAVED["pickles"].items()}


def globals_of(data: bytes) -> set[str]:
    """The ``module name`` pairs a pickle's GLOBAL and STACK_GLOBAL opcodes name."""
    found, strings = set(), []
    for op, arg, _ in pickletools.genops(data):
        if op.name in ("SHORT_BINUNICODE", "BINUNICODE", "UNICODE"):
            strings.append(arg)
        elif op.name == "GLOBAL":
            found.add(arg)
        elif op.name == "STACK_GLOBAL":
            found.add(f"{strings[-2]} {strings[-1]}")
    return found


def test_every_protocol_and_kind_is_kept() -> None:
    kinds = {name.split("/")[0] for name in PICKLES}
    assert kinds == {"eager", "lazy", "lazy_slots", "lazy_unread"}
    assert {int(name.split("/")[1]) for name in PICKLES} == set(range(pickle.HIGHEST_PROTOCOL + 1))


@pytest.mark.parametrize("name", sorted(PICKLES))
def test_release_pickle_names_the_format_functions(name: str) -> None:
    function = "_ids_from_int32" if name.startswith("eager") else "_held_ids_from_int32"
    assert f"tokcore.pickling {function}" in globals_of(PICKLES[name])


@pytest.mark.parametrize("name", sorted(PICKLES))
def test_release_pickle_loads(name: str) -> None:
    obj: Any = pickle.loads(PICKLES[name])
    kind = name.split("/")[0]
    if kind == "eager":
        assert type(obj) is EagerRequest and obj.request_id == "r1"
        assert obj.prompt_token_ids == IDS and type(obj.prompt_token_ids) is list
        assert obj.output_token_ids == [1, 2, 3]
    elif kind == "lazy_slots":
        assert type(obj) is LazySlots and obj.label == "s"
        assert _is_held(obj, "ids")
        assert tokcore.ids_buffer(obj, "ids").tolist() == list(range(-5, 300))
        assert obj.ids == list(range(-5, 300))
    else:
        assert type(obj) is LazyRequest
        assert obj.request_id == ("r2" if kind == "lazy" else "r3")
        assert _is_held(obj, "prompt_token_ids")
        assert tokcore.ids_buffer(obj, "prompt_token_ids").tolist() == IDS
        assert obj.prompt_token_ids == IDS and not _is_held(obj, "prompt_token_ids")


@pytest.mark.parametrize("protocol", range(pickle.HIGHEST_PROTOCOL + 1))
def test_today_writes_what_the_release_reads(protocol: int) -> None:
    """The names today's pickles call are the release's: a release reads them too."""
    for obj in (EagerRequest("r1", IDS, (1, 2, 3)), LazyRequest("r2", IDS)):
        data = pickle.dumps(obj, protocol=protocol)
        named = {g for g in globals_of(data) if g.startswith("tokcore")}
        assert named <= {"tokcore.pickling _ids_from_int32",
                         "tokcore.pickling _held_ids_from_int32"} and named
        saved = PICKLES[f"{'eager' if type(obj) is EagerRequest else 'lazy'}/{protocol}"]
        assert data == saved
