"""tokcore.plugins.vllm: vLLM's chunks written by the stream writer, the same text as vLLM's
pydantic dump, on the vLLM-shaped stand-ins of tests/writer/_writer_oracles.py, built as
vLLM's generators build them (_vllm_chunks.py). It needs no vLLM: ``make test`` runs it, and
``make test-vllm`` too (in this tree's venv, before the files that test vLLM itself:
test_vllm_real.py is this file on vLLM's own models)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _budget import examples
from _vllm_chunks import Models, chat_stream, completion_stream, others
from hypothesis import given, settings
from hypothesis import strategies as st

from tokcore.plugins import vllm as plugin


def _oracles() -> Any:
    path = Path(__file__).parent.parent / "writer" / "_writer_oracles.py"
    spec = importlib.util.spec_from_file_location("_writer_oracles_for_vllm", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # (pydantic resolves the models' annotations there)
    spec.loader.exec_module(module)
    return module


ORACLES = _oracles()
STAND_INS = Models(ORACLES.VChunk, ORACLES.VChoice, ORACLES.VDelta, ORACLES.VUsage,
                   ORACLES.VPromptDetails, ORACLES.VCompletionDetails, ORACLES.VCompletionChunk,
                   ORACLES.VCompletionChoice)


@pytest.fixture(scope="module")
def installed() -> Iterator[None]:
    plugin.install(STAND_INS.chat, STAND_INS.completion)
    try:
        yield
    finally:
        plugin.uninstall()


def check(stream: list[tuple[Any, dict[str, bool]]]) -> int:
    """Each chunk's patched dump equals pydantic's; how many the writer wrote."""
    written = 0
    for chunk, options in stream:
        got = chunk.model_dump_json(**options)
        original, _ = plugin._PATCHED[type(chunk)]
        assert got == original(chunk, **options), (chunk, options)
        try:
            frame = plugin.chat_frame if type(chunk) is STAND_INS.chat else \
                plugin.completion_frame
            if options in ({"exclude_unset": True}, {"exclude_unset": True, "exclude_none": True},
                           {"exclude_unset": False, "exclude_none": True}):
                frame(chunk, options.get("exclude_none", False))
                written += 1
        except plugin._Other:
            pass
    return written


@settings(max_examples=examples(150))
@given(data=st.data())
def test_chat_streams(installed: None, data: st.DataObject) -> None:
    stream = chat_stream(STAND_INS, data.draw)
    assert check(stream) == len(stream)  # every chunk of these is the writer's


@settings(max_examples=examples(150))
@given(data=st.data())
def test_completion_streams(installed: None, data: st.DataObject) -> None:
    stream = completion_stream(STAND_INS, data.draw)
    assert check(stream) == len(stream)


@settings(max_examples=examples(30))
@given(data=st.data())
def test_other_chunks_are_pydantics(installed: None, data: st.DataObject) -> None:
    assert check(others(STAND_INS, data.draw)) == 0


def test_a_lone_surrogate_is_pydantics_error(installed: None) -> None:
    chunk = STAND_INS.chat(id="a", created=1, model="m", choices=[STAND_INS.choice(
        index=0, delta=STAND_INS.delta(content="\ud800"), logprobs=None, finish_reason=None,
        token_ids=None)])
    original, _ = plugin._PATCHED[STAND_INS.chat]
    with pytest.raises(Exception) as theirs:
        original(chunk, exclude_unset=True)
    with pytest.raises(type(theirs.value)):
        chunk.model_dump_json(exclude_unset=True)


def test_install_again_and_uninstall() -> None:
    saved = dict(plugin._PATCHED)  # (the module fixture's, if it ran here)

    class Chunk(ORACLES.VChunk):  # type: ignore[misc, name-defined]
        pass

    before = Chunk.model_dump_json
    plugin.install(Chunk, None)
    patched = Chunk.model_dump_json
    plugin.install(Chunk, None)  # again: nothing
    assert Chunk.model_dump_json is patched is not before
    del plugin._PATCHED[Chunk]
    plugin._PATCHED, rest = {Chunk: (before, False)}, plugin._PATCHED
    plugin.uninstall()
    plugin._PATCHED.update(rest)
    assert Chunk.model_dump_json is before and "model_dump_json" not in Chunk.__dict__
    assert plugin._PATCHED == saved
    with pytest.raises(TypeError, match="no model_dump_json"):
        plugin.install(int, None)


def test_the_writers_are_bounded(installed: None) -> None:
    for i in range(plugin.MAX_WRITERS + 10):
        chunk = STAND_INS.chat(id=f"c{i}", created=1, model="m", choices=[STAND_INS.choice(
            index=0, delta=STAND_INS.delta(content="x"), logprobs=None, finish_reason=None,
            token_ids=None)])
        chunk.model_dump_json(exclude_unset=True)
        assert len(plugin._WRITERS) <= plugin.MAX_WRITERS


def test_the_entry_point_is_declared_and_switched_off_by_default() -> None:
    """pyproject declares it; register() without TOKCORE_VLLM_PLUGIN=1 does nothing, and with
    it, where vLLM is not installed, logs one WARNING and changes nothing. Nothing of vLLM
    (or a framework) is imported by importing the plugin."""
    import tomllib

    root = Path(__file__).parent.parent.parent
    project = tomllib.loads((root / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["vllm.general_plugins"] == {
        "tokcore": "tokcore.plugins.vllm:register"}
    code = ("import sys, tokcore.plugins.vllm as p; p.register(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('vllm', 'pydantic', 'starlette', 'fastapi')), p._PATCHED)")
    env = {k: v for k, v in os.environ.items() if k != plugin.SWITCH}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    assert done.stdout.strip() == "[] {}"
    if importlib.util.find_spec("vllm") is None:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={**env, plugin.SWITCH: "1"})
        assert done.stdout.strip() == "[] {}"
        assert "found no chunk classes" in done.stderr
