"""tokcore.plugins.vllm without vLLM: the entry point, the switch, the registry of what the
plugin changes and the releases it knows, as data. It needs no vLLM: ``make test`` runs it,
and ``make test-vllm`` too (in this tree's venv, before the files that test the plugin
against vLLM itself)."""

from __future__ import annotations

import ast
import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tokcore.plugins import _vllm_releases as releases
from tokcore.plugins import _vllm_targets as targets
from tokcore.plugins import vllm as plugin

ROOT = Path(__file__).resolve().parent.parent.parent
PLUGINS = ROOT / "tokcore" / "plugins"


def test_the_entry_point_is_declared_and_switched_off_by_default() -> None:
    """pyproject declares it; register() without TOKCORE_VLLM_PLUGIN does nothing, and with
    it, where vLLM is not installed, logs one WARNING and changes nothing. Nothing of vLLM
    (or a framework) is imported by importing the plugin."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["entry-points"]["vllm.general_plugins"] == {
        "tokcore": "tokcore.plugins.vllm:register"}
    code = ("import sys, tokcore.plugins.vllm as p; p.register(); "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in "
            "('vllm', 'pydantic', 'starlette', 'fastapi')), p.mode())")
    env = {k: v for k, v in os.environ.items() if k != plugin.SWITCH}
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env=env)
    assert done.stdout.strip() == "[] off"
    if importlib.util.find_spec("vllm") is None:
        done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                              check=True, env={**env, plugin.SWITCH: "1"})
        assert done.stdout.strip() == "[] off"
        assert done.stderr.count("tokcore's vLLM plugin") == 1, done.stderr
        assert "no vLLM here" in done.stderr, done.stderr


def test_the_switch_values() -> None:
    assert plugin.MODES == {"": "off", "0": "off", "1": "generator", "generator": "generator"}


def _imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.append(node.module)
    return found


def test_vllms_names_are_imported_in_one_place() -> None:
    """Only _vllm_names imports vLLM (by the registry's module names, when called); every
    other module of the plugin takes vLLM's names from it."""
    modules = sorted(PLUGINS.glob("*vllm*.py"))
    assert len(modules) >= 12
    for path in modules:
        imported = [name for name in _imports(path) if name.split(".")[0] == "vllm"]
        text = path.read_text(encoding="utf-8")
        if path.name == "_vllm_names.py":
            assert "importlib.import_module" in text
        else:
            assert not imported and "import_module" not in text, (path.name, imported)


def test_the_registry() -> None:
    """Every target is ``module:qualified.name`` in a vLLM module, its role one of the five,
    its short name unique; every patch is a target, replaced or wrapped, with its why, how,
    what its code stands in for and what would retire it."""
    names = [t.name for t in targets.TARGETS]
    assert len(set(names)) == len(names)
    assert len({targets.short(name) for name in names}) == len(names)
    for target in targets.TARGETS:
        assert re.fullmatch(r"vllm(\.\w+)+:\w+(\.\w+)*", target.name), target.name
        assert target.role in ("replaced", "wrapped", "reproduced", "called", "model")
        assert target.why
    roles = {t.name: t.role for t in targets.TARGETS}
    assert {roles[p.target] for p in targets.PATCHES} <= {"replaced", "wrapped"}
    assert {p.target for p in targets.PATCHES} == {
        name for name, role in roles.items() if role == "replaced"} | {
        targets.PATCHES[2].target}
    for item in targets.PATCHES:
        assert item.why and item.how and item.retire
        assert item.reproduces and set(item.reproduces) <= set(names), item.reproduces


def test_each_release_has_every_target() -> None:
    """Each known release has a digest (or ``absent``) for every target and pydantic-core's
    release; no two releases have the same fingerprint; the rules are booleans."""
    expected = {targets.short(t.name) for t in targets.TARGETS} | {releases.PYDANTIC_CORE}
    seen = []
    for name, release in releases.RELEASES.items():
        assert release.name == name
        assert set(release.digests) == expected, set(release.digests) ^ expected
        assert all(re.fullmatch(r"[0-9a-f]{16}|absent", value)
                   for key, value in release.digests.items()
                   if key != releases.PYDANTIC_CORE), name
        assert all(type(rule) is bool for rule in release.rules)
        assert release.digests not in seen
        seen.append(release.digests)
    assert list(releases.RELEASES) == ["0.32.0", "0.33.0", "0.34.0"]


def test_detect_names_the_closest_release() -> None:
    row = dict(releases.RELEASES["0.34.0"].digests)
    assert releases.detect(row)[0] is releases.RELEASES["0.34.0"]
    row["UsageInfo"] = "0" * 16
    row["pydantic-core"] = "2.99.0"
    row["keeps_tool_calls"] = "absent"
    found, closest, differ = releases.detect(row)
    assert found is None and closest is releases.RELEASES["0.34.0"]
    assert differ == ["keeps_tool_calls (absent here)", "UsageInfo",
                      "pydantic-core 2.99.0 (checked: 2.50.5)"]


@pytest.mark.parametrize("value", ["dump", "yes"])
def test_another_value_is_off_with_one_warning(value: str, monkeypatch: pytest.MonkeyPatch,
                                               caplog: pytest.LogCaptureFixture) -> None:
    monkeypatch.setenv(plugin.SWITCH, value)
    with caplog.at_level("WARNING", "tokcore.plugins.vllm"):
        plugin.register()
    assert len(caplog.records) == 1
    assert ("dump mode is gone" in caplog.records[0].getMessage()) == (value == "dump")
    assert plugin.mode() == "off"


def test_the_docs_are_the_recorded_runs() -> None:
    """The benchmarks page's in-process section and the vLLM guide's table of releases are
    what bench/bench_vllm_inprocess.py writes from the records (docs/_static/bench/
    vllm-inprocess.json, vllm.json): one run per known release, every case in it (the
    parser cases too)."""
    import importlib.util as util
    import json

    spec = util.spec_from_file_location("bench_vllm_inprocess",
                                        ROOT / "bench" / "bench_vllm_inprocess.py")
    assert spec and spec.loader
    bench = util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    recorded = json.loads(bench.RECORDED.read_text(encoding="utf-8"))
    server = json.loads(bench.SERVER_RECORD.read_text(encoding="utf-8"))
    assert list(recorded["runs"]) == list(releases.RELEASES) == list(bench.COVERED)
    for release, run in recorded["runs"].items():
        assert run["vllm"] == release and set(run["cases"]) == set(bench.CASES)
        assert all(len(row["rounds"]) == run["rounds"] >= 5 for row in run["cases"].values())
        parsers = run["parser cases"]
        assert set(parsers) == set(bench.PARSER_CASES)
        assert all(len(row["rounds outside the parser"]) == run["rounds"] >= 5
                   for row in parsers.values())
    page = bench.PAGE.read_text(encoding="utf-8")
    assert bench.page(recorded, page) == page, "python bench/bench_vllm_inprocess.py --docs"
    guide = bench.GUIDE.read_text(encoding="utf-8")
    assert bench.guide(recorded, server, guide) == guide, \
        "python bench/bench_vllm_inprocess.py --docs"
