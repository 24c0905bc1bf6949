"""tokcore.plugins.vllm against vLLM itself (``make test-vllm``: vLLM's CPU wheel in a venv
of its own; skipped where vLLM is not installed, as in make test's venv).

vLLM's own plugin loader (``load_general_plugins``) finds the entry point and calls it; then
each chunk built with vLLM's own protocol models as its stream generators build them
(_vllm_chunks.py) is dumped by the patched ``model_dump_json`` and by pydantic's: the same
text, the writer writing every chunk it has a frame for."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from _budget import examples
from _vllm_chunks import Models, chat_stream, completion_stream, others
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("vllm", reason="vLLM is not installed here: make test-vllm runs this")

from tokcore.plugins import vllm as plugin  # noqa: E402


def models() -> Models:
    from vllm.entrypoints.generate.base.protocol import (  # type: ignore[import-not-found]
        DeltaMessage,
    )
    from vllm.entrypoints.openai.chat_completion.protocol import (
        ChatCompletionResponseStreamChoice,
        ChatCompletionStreamResponse,
    )
    from vllm.entrypoints.openai.completion.protocol import (
        CompletionResponseStreamChoice,
        CompletionStreamResponse,
    )
    from vllm.entrypoints.serve.engine.protocol import (  # type: ignore[import-not-found]
        CompletionTokenUsageInfo,
        PromptTokenUsageInfo,
        UsageInfo,
    )

    return Models(ChatCompletionStreamResponse, ChatCompletionResponseStreamChoice,
                  DeltaMessage, UsageInfo, PromptTokenUsageInfo, CompletionTokenUsageInfo,
                  CompletionStreamResponse, CompletionResponseStreamChoice)


@pytest.fixture(scope="module")
def loaded(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Models]:
    """The entry point as an installed tokcore declares it (a dist-info on sys.path), loaded
    by vLLM's own loader with the switch on."""
    import vllm.plugins

    site = tmp_path_factory.mktemp("site")
    info = site / "tokcore_vllm_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tokcore-vllm-probe\n"
                                   "Version: 0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\ntokcore = tokcore.plugins.vllm:register\n")
    sys.path.insert(0, str(site))
    mp = pytest.MonkeyPatch()
    mp.setenv(plugin.SWITCH, "1")
    mp.setattr(vllm.plugins, "plugins_loaded", False)
    try:
        vllm.plugins.load_general_plugins()
        found = models()
        assert found.chat in plugin._PATCHED and found.completion in plugin._PATCHED
        yield found
    finally:
        plugin.uninstall()
        mp.undo()
        sys.path.remove(str(site))


def check(m: Models, stream: list[tuple[Any, dict[str, bool]]]) -> int:
    written = 0
    for chunk, options in stream:
        original, _ = plugin._PATCHED[type(chunk)]
        assert chunk.model_dump_json(**options) == original(chunk, **options), (chunk, options)
        frame = plugin.chat_frame if type(chunk) is m.chat else plugin.completion_frame
        try:
            if options.get("exclude_unset") is not None and len(options) <= 2:
                frame(chunk, options.get("exclude_none", False))
                written += 1
        except plugin._Other:
            pass
    return written


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_chat_streams_as_vllm_writes_them(loaded: Models, data: st.DataObject) -> None:
    stream = chat_stream(loaded, data.draw)
    assert check(loaded, stream) == len(stream)


@settings(max_examples=examples(300), deadline=None)
@given(data=st.data())
def test_completion_streams_as_vllm_writes_them(loaded: Models, data: st.DataObject) -> None:
    stream = completion_stream(loaded, data.draw)
    assert check(loaded, stream) == len(stream)


@settings(max_examples=examples(30), deadline=None)
@given(data=st.data())
def test_other_chunks_are_pydantics(loaded: Models, data: st.DataObject) -> None:
    assert check(loaded, others(loaded, data.draw)) == 0


def test_the_plugin_file_is_this_trees() -> None:
    assert Path(plugin.__file__).resolve().parent.parent.parent == \
        Path(__file__).resolve().parent.parent.parent
