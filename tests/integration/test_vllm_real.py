"""tokcore.plugins.vllm loaded by vLLM itself (``make test-vllm``: a venv of its own per vLLM
release; skipped where vLLM is not installed, as in make test's venv).

vLLM's own plugin loader (``load_general_plugins``) finds the entry point as an installed
tokcore declares it and calls it, with the switch on: the plugin is on (this release is one
it knows), vLLM's two stream generators and its logprobs processor's ``from_new_request``
are the plugin's, and nothing was logged; with the switch off, the loader changes nothing."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm", reason="vLLM is not installed here: make test-vllm runs this")

from tokcore.plugins import _vllm_targets as targets  # noqa: E402
from tokcore.plugins import vllm as plugin  # noqa: E402


@pytest.fixture
def entry_point(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The entry point as an installed tokcore declares it (a dist-info on sys.path), for
    vLLM's own loader to find."""
    import vllm.plugins

    info = tmp_path / "tokcore_vllm_probe-0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tokcore-vllm-probe\n"
                                   "Version: 0\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\ntokcore = tokcore.plugins.vllm:register\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(vllm.plugins, "plugins_loaded", False)
    monkeypatch.delenv("VLLM_PLUGINS", raising=False)
    plugin.uninstall()
    try:
        yield
    finally:
        plugin.uninstall()


def _patched() -> list[str]:
    """The patch targets whose attribute is not vLLM's own now."""
    from tokcore.plugins._vllm_names import resolve

    found = []
    for item in targets.PATCHES:
        attribute = resolve(item.target)
        code = getattr(getattr(attribute, "__func__", attribute), "__module__", "")
        if code.startswith("tokcore."):
            found.append(item.target)
    return found


@pytest.mark.parametrize("value", ["1", ""])
def test_vllms_loader_calls_the_entry_point(entry_point: None, value: str,
                                            monkeypatch: pytest.MonkeyPatch,
                                            caplog: pytest.LogCaptureFixture) -> None:
    import vllm.plugins

    monkeypatch.setenv(plugin.SWITCH, value)
    with caplog.at_level("INFO", "tokcore.plugins.vllm"):
        vllm.plugins.load_general_plugins()
    assert [r.getMessage() for r in caplog.records if r.name == "tokcore.plugins.vllm"] == []
    assert plugin.mode() == ("generator" if value else "off")
    assert _patched() == ([item.target for item in targets.PATCHES] if value else [])


def test_the_plugin_file_is_this_trees() -> None:
    assert Path(plugin.__file__).resolve().parent.parent.parent == \
        Path(__file__).resolve().parent.parent.parent
    assert "tokcore" in sys.modules
