"""The writer's wing as users reach it: every public name through ``tokcore``, and the
argument tuples pickled and loaded by their public names (the move to ``tokcore/writer/``
changed no user's import nor pickle)."""

from __future__ import annotations

import pickle

import pytest

import tokcore


@pytest.mark.parametrize("value", [
    tokcore.Step("a", finish_reason="stop"),
    tokcore.Usage(5, 2),
    tokcore.TopLogprob("a", -0.5),
    tokcore.TokenLogprob("a", -0.5, top=(tokcore.TopLogprob("b", -1.0),)),
])
def test_the_argument_tuples_pickle(value: object) -> None:
    loaded = pickle.loads(pickle.dumps(value))
    assert loaded == value and type(loaded) is type(value)
    assert type(value).__module__.startswith("tokcore.writer.")


def test_the_public_names_are_the_writer_wings() -> None:
    from tokcore.writer import _writer

    for name in _writer.__all__:
        assert getattr(tokcore, name) is getattr(_writer, name), name
