"""The figures the README and docs/benchmarks.md show, from one recorded run (results.json).

Usage: python bench/figures.py [--merge RESULTS_JSON] [--check]

The recorded run is docs/_static/bench/results.json (``bench/plots.py --docs`` copies a whole
run there, with its charts). This script writes, from it, the README's figures (between its
``figures`` markers) and the table of docs/benchmarks.md (between its ``bench-table``
markers), so that both show the same run's numbers. ``--merge`` first puts the scripts of
another run (a ``make bench BENCH_ARGS="-k e2e"``) into the recorded one, each stamped with
its own date, which the pages then name. ``--check`` writes nothing and fails if a page is
not what the recorded run gives (tests/test_docs.py checks the same).

No matplotlib here: the tests import this module.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "docs" / "_static" / "bench" / "results.json"
README = ROOT / "README.md"
PAGE = ROOT / "docs" / "benchmarks.md"
FAST, REFERENCE = "tokcore-c", "tokcore-py"
NAMES = {"bench_ids": "Token ids", "bench_b64": "Base64", "bench_relay": "Usage relay",
         "bench_members": "JSON members", "bench_pickle": "Pickling",
         "bench_wire": "Ids in JSON and MessagePack", "bench_writer": "Stream writer"}
PAGE_MARKERS = ("<!-- bench-table: begin (bench/plots.py --docs) -->",
                "<!-- bench-table: end -->")
README_MARKERS = ("<!-- figures: begin (bench/figures.py, from the recorded results.json) -->",
                  "<!-- figures: end -->")
#: the README's rows: (what, script, case, tokcore's impl, the baseline's name, its impl)
README_ROWS = [
    ("`pack_ids`", "bench_ids", "pack 40k uniform", FAST, "`struct.pack`", "struct.pack"),
    ("`ids_to_b64`", "bench_b64", "ids_to_b64 40k uniform", FAST, "`array` + pybase64",
     "array + pybase64"),
    ("`b64_to_ids`, Zipf ids", "bench_b64", "b64_to_ids 40k zipf", FAST, "numpy + `base64`",
     "numpy + base64"),
    ("`find_member` of the ids, 213 KB answer", "bench_members", "find_member ids, 213 KB body",
     FAST, "`json.loads(body)[key]`", "json.loads(body)[key]"),
    ("`set_member` of the ids into a request", "bench_members",
     "set_member ids into a generation request", FAST, "`orjson.dumps` of the dict",
     "orjson.dumps(request dict)"),
    ("`UsageRelay.feed`, one 260-byte event", "bench_relay", "feed 1 event, pass-through", FAST,
     "`json.loads`", "json.loads per event"),
    ("the usage event rewritten", "bench_relay", "rewrite the usage event", FAST,
     "`json.loads` + update + `json.dumps`", "prefilter+json.loads+update+json.dumps"),
    ("relay 1 MiB in 64 KiB reads", "bench_relay", "relay 1 MiB in 64 KiB reads", FAST,
     "split + pre-filter + `json`", "split+prefilter+json rewrite"),
    ("pickle + unpickle, `lazy=True`", "bench_pickle",
     "pickle+unpickle 40k uniform, fresh process", "tokcore-c lazy", "plain pickle",
     "plain pickle"),
    ("`convert_ids`, JSON array -> MessagePack", "bench_wire", "convert json->msgpack 40k uniform",
     FAST, "`orjson` + msgspec", "orjson.loads + msgspec encode"),
    ("`StreamWriter.text`, one streamed chunk", "bench_writer", "one text chunk", FAST,
     "pydantic build + dump", "pydantic build + model_dump_json (openai ChatCompletionChunk)"),
    ("a chunk with 20 top logprobs", "bench_writer", "a chunk with 20 top logprobs", FAST,
     "pydantic build + dump", "pydantic build + model_dump_json (openai ChatCompletionChunk)"),
]
#: the README's end-to-end rows: (what, proxy, the baseline's name, baseline proxy, the
#: figures' phase: the streams, or the conventions' short answers)
E2E_ROWS = [
    ("the example orchestrator's CPU per request (*)", "tokcore", "`json` everywhere",
     "plain", "proxies"),
    ("the same on FastAPI (uvicorn) (*)", "fastapi", "aiohttp forwarding untouched", "floor",
     "proxies"),
    ("the proxy in TensorRT-LLM's convention (*)", "trtllm", "its own `json` + msgspec",
     "trtllm-stack", "short answers"),
    ("the example API server's CPU, StreamWriter (*)", "api-writer", "pydantic chunks",
     "api-pydantic", "api servers"),
]


def fmt_time(seconds: float) -> str:
    for unit, scale in (("s", 1.0), ("ms", 1e-3), ("us", 1e-6), ("ns", 1e-9)):
        if seconds >= scale:
            return f"{seconds / scale:.3g} {unit}"
    return f"{seconds * 1e9:.3g} ns"


def verdict(ratio: float | None) -> str:
    if not ratio:
        return ""
    return f"{ratio:.1f}x faster" if ratio >= 1 else f"{1 / ratio:.1f}x slower"


def shown(impls: dict[str, float]) -> list[tuple[str, float]]:
    """The implementations a chart and the page show: tokcore's fast twin and every
    baseline (the Python reference twins are for checking, not for comparing), fastest
    first."""
    rows = [(impl, t) for impl, t in impls.items() if not impl.startswith(REFERENCE)]
    return sorted(rows, key=lambda row: row[1])


def rows(script: dict[str, Any]) -> list[tuple[str, str, float, float | None]]:
    """(case, impl, seconds, how many times faster tokcore-c is) of one script."""
    out = []
    for case, impls in script["seconds"].items():
        fast = impls.get(FAST)
        for impl, seconds in shown(impls):
            ratio = fast and seconds / fast if "tokcore" not in impl else None
            out.append((case, impl, seconds, ratio))
    return out


def run_line(results: dict[str, Any]) -> str:
    machine = results["machine"]
    return (f"{machine['cpu']} ({machine['cores']} cores, {machine['system']}, Python "
            f"{machine['python']}, base64 kernels {machine['b64 kernels']})")


def later_runs(results: dict[str, Any]) -> list[tuple[str, str]]:
    """(script, its run's date) of the pyperf scripts merged in from a run of their own."""
    return [(stem, script["date"]) for stem, script in results["scripts"].items()
            if "seconds" in script and script.get("date", results["date"]) != results["date"]]


def page_table(results: dict[str, Any]) -> str:
    """docs/benchmarks.md's table: every case of every pyperf script."""
    later = "".join(f" {NAMES.get(stem, stem)}: `bench/{stem}.py`'s run of {date}, on the same "
                    "machine." for stem, date in later_runs(results))
    lines = [f"Run of {results['date']} on {run_line(results)}; {results['timer']}.{later}",
             "",
             "| hot path | case | implementation | time per call | tokcore-c is |",
             "| --- | --- | --- | --- | --- |"]
    for stem, script in results["scripts"].items():
        if "seconds" not in script:
            continue
        for case, impl, seconds, ratio in rows(script):
            lines.append(f"| {NAMES.get(stem, stem)} | {case} | {impl.replace('|', '/')} | "
                         f"{fmt_time(seconds)} | {verdict(ratio)} |")
    e2e = e2e_table(results)
    if e2e:
        lines += ["", *e2e]
    return "\n".join(lines)


def e2e_table(results: dict[str, Any]) -> list[str]:
    """The end-to-end figures (bench/bench_e2e.py), when the run has them."""
    script = results["scripts"].get("bench_e2e", {})
    figures = script.get("figures")
    if not figures:
        return []
    when = f", run of {script['date']}" if script.get("date") else ""
    lines = [f"The example orchestrators end to end (bench/bench_e2e.py{when}: "
             f"{figures['prompt tokens']:,}-token prompts, {figures['output tokens']} output "
             f"tokens, {figures['concurrency']} concurrent streams, "
             f"{figures['requests per proxy']:,} requests a proxy); the proxy process's CPU:",
             "", "| proxy | CPU per request | CPU per streamed token | requests per second |",
             "| --- | --- | --- | --- |"]
    for name, proxy in figures["proxies"].items():
        lines.append(f"| {PROXY_NAMES.get(name, name)} | {fmt_time(proxy['cpu per request'])} "
                     f"| {fmt_time(proxy['cpu per token'])} | "
                     f"{proxy['requests per second']:.0f} |")
    lines += conventions_table(figures)
    api = figures.get("api servers")
    if api:
        lines += ["", "The example API server (examples/api_server.py: the same fake engine's "
                  f"{api['output tokens']}-token streams on FastAPI under uvicorn, each chunk a "
                  "pydantic model dumped as vLLM does, or written by `StreamWriter`: the same "
                  "bytes); the server process's CPU:", "",
                  "| server | CPU per request | CPU per streamed token | requests per second |",
                  "| --- | --- | --- | --- |"]
        for name, server in api["proxies"].items():
            lines.append(f"| {PROXY_NAMES.get(name, name)} | "
                         f"{fmt_time(server['cpu per request'])} | "
                         f"{fmt_time(server['cpu per token'])} | "
                         f"{server['requests per second']:.0f} |")
    lines += ["", "| goal | ratio | goal | met |", "| --- | --- | --- | --- |"]
    for goal in figures["goals"]:
        tokens = goal.get("output tokens", figures["output tokens"])
        lines.append(f"| CPU per request, {goal['proxy']} / {goal['baseline']}, "
                     f"{tokens}-token answers | {goal['ratio']:.3f} | <= {goal['goal']} | "
                     f"{'yes' if goal['ok'] else 'no'} |")
    return lines


def conventions_table(figures: dict[str, Any]) -> list[str]:
    """The stacks' conventions: each in the stack's own way and tokcore's, the streams'
    figures and the short answers'."""
    conventions = figures.get("conventions")
    if not conventions:
        return []
    short = figures["short answers"]
    lines = ["", "The stacks' token-id conventions, each in the stack's own way (the context "
             "answer parsed with `json`, the ids a list, the request encoded by msgspec or "
             "`json`) and tokcore's (`find_member`, `convert_ids`, `msgspec.Raw` or "
             "`set_member`), the answer relayed by the same adapter in both; the proxy's CPU "
             "per request:", "",
             "| convention | output tokens | the stack's own way | tokcore | tokcore / stack |",
             "| --- | --- | --- | --- | --- |"]
    for convention, pair in conventions.items():
        for tokens, proxies in ((figures["output tokens"], figures["proxies"]),
                                (short["output tokens"], short["proxies"])):
            stack = proxies[pair["stack"]]["cpu per request"]
            tokcore = proxies[pair["tokcore"]]["cpu per request"]
            lines.append(f"| {CONVENTION_NAMES.get(convention, convention)} | {tokens} | "
                         f"{fmt_time(stack)} | {fmt_time(tokcore)} | {tokcore / stack:.3f} |")
    return lines


CONVENTION_NAMES = {"trtllm": "TensorRT-LLM (JSON ids into MessagePack)",
                    "trtllm-ctxbytes": "TensorRT-LLM, ctx bytes (base64 into MessagePack)",
                    "vllm": "vLLM (`kv_transfer_params`)"}
PROXY_NAMES = {"plain": "aiohttp, plain (`json` everywhere)",
               "api-pydantic": "API server (FastAPI), a pydantic chunk a token",
               "api-writer": "API server (FastAPI), StreamWriter",
               "tokcore": "aiohttp, tokcore (zero-decode)",
               "floor": "aiohttp, floor (forwarding untouched)",
               "fastapi": "FastAPI under uvicorn, tokcore",
               **{f"{convention}{suffix}": f"aiohttp, {name.split(' (')[0]}, {way}"
                  for convention, name in CONVENTION_NAMES.items()
                  for suffix, way in (("", "tokcore"), ("-stack", "the stack's own way"))}}


def goals_passed(results: dict[str, Any]) -> tuple[int, int]:
    """(met, checked) speed goals of the run, the end-to-end ones included."""
    goals = [g["ok"] for script in results["scripts"].values()
             for g in script.get("goals", [])]
    goals += [g["ok"] for g in results["scripts"].get("bench_e2e", {}).get(
        "figures", {}).get("goals", [])]
    return sum(goals), len(goals)


def twins_range(results: dict[str, Any]) -> tuple[float, str, float, str] | None:
    """How many times slower the pure-Python twins are, least and most, and where."""
    ratios = [(impls[REFERENCE] / impls[FAST], case)
              for script in results["scripts"].values() if "seconds" in script
              for case, impls in script["seconds"].items()
              if FAST in impls and REFERENCE in impls]
    if not ratios:
        return None
    (low, low_case), (high, high_case) = min(ratios), max(ratios)
    return low, low_case, high, high_case


def readme_block(results: dict[str, Any]) -> str:
    """The README's figures: a row per hot path and the end-to-end ones."""
    met, checked = goals_passed(results)
    lines = [f"One `make bench` run of {results['date']} on {run_line(results)}, the cores "
             "shared with other work; each ratio compares two timings of one run: that one "
             "or, for a row marked, the later run of one script named below "
             f"({met} of the {checked} speed goals of these runs met; the [benchmarks page]"
             "(docs/benchmarks.md) has every case, from the same runs):", "",
             "| case (40k token ids unless said) | tokcore | baseline | tokcore is |",
             "| --- | --- | --- | --- |"]
    later = dict(later_runs(results))
    for what, stem, case, impl, name, baseline in README_ROWS:
        if case not in results["scripts"].get(stem, {}).get("seconds", {}):
            continue  # a recorded run from before the script
        seconds = results["scripts"][stem]["seconds"][case]
        fast, slow = seconds[impl], seconds[baseline]
        mark = " (+)" if stem in later else ""
        lines.append(f"| {what}{mark} | {fmt_time(fast)} | {name} {fmt_time(slow)} | "
                     f"{verdict(slow / fast)} |")
    script = results["scripts"].get("bench_e2e", {})
    figures = script.get("figures")
    if figures:
        proxies = figures["proxies"]
        for what, proxy, name, baseline, phase in E2E_ROWS:
            phased = figures if phase == "proxies" else figures.get(phase)
            if not phased or proxy not in phased["proxies"]:  # a run before the conventions
                continue
            mine, theirs = (phased["proxies"][proxy]["cpu per request"],
                            phased["proxies"][baseline]["cpu per request"])
            lines.append(f"| {what} | {fmt_time(mine)} | {name} {fmt_time(theirs)} | "
                         f"{mine / theirs:.2f} of it |")
        when = f" (run of {script['date']})" if script.get("date") else ""
        short = (f" (TensorRT-LLM's: answers of {figures['short answers']['output tokens']} "
                 "tokens, where the hand-off of the prompt's ids is most of the work)"
                 if "short answers" in figures else "")
        lines += ["", f"(*) `bench/bench_e2e.py`{when}: {figures['concurrency']} concurrent "
                  f"streams of {figures['output tokens']} tokens{short}, "
                  f"{figures['prompt tokens'] // 1000}k-token prompts, "
                  f"{figures['requests per proxy']:,} requests a proxy; the aiohttp proxy "
                  "forwarding the stream untouched cost "
                  f"{fmt_time(proxies['floor']['cpu per request'])}."]
    # the notes below the table, one paragraph on one line (the README is kept short)
    notes = [lines.pop()] if figures else []
    if later:
        notes.append("(+) " + "; ".join(f"`bench/{stem}.py` (run of {date}, same machine)"
                                        for stem, date in later.items()) + ".")
    twins = twins_range(results)
    if twins:
        low, low_case, high, high_case = twins
        notes.append(f"The pure-Python twins (`TOKCORE_NO_EXTENSIONS=1`) are {low:.0f}x "
                     f"({low_case}) to {high:.0f}x ({high_case}) slower than the compiled "
                     "ones in these runs.")
    if notes:
        lines += ([] if figures else [""]) + [" ".join(notes)]
    return "\n".join(lines)


def replace_between(text: str, markers: tuple[str, str], block: str) -> str:
    begin, end = markers
    head, found, rest = text.partition(begin)
    if not found:
        raise ValueError(f"no {begin!r} in the page")
    _, found, tail = rest.partition(end)
    if not found:
        raise ValueError(f"no {end!r} after {begin!r}")
    return f"{head}{begin}\n{block}\n{end}{tail}"


def pages(results: dict[str, Any]) -> dict[Path, str]:
    """The README and the benchmarks page as the recorded run makes them."""
    return {README: replace_between(README.read_text(encoding="utf-8"), README_MARKERS,
                                    readme_block(results)),
            PAGE: replace_between(PAGE.read_text(encoding="utf-8"), PAGE_MARKERS,
                                  page_table(results))}


def merge(recorded: dict[str, Any], other: dict[str, Any]) -> dict[str, Any]:
    """``recorded`` with the scripts of ``other`` put in, each stamped with its run's date."""
    scripts = dict(recorded["scripts"])
    for stem, script in other["scripts"].items():
        scripts[stem] = {**script, "date": other["date"]}
    return {**recorded, "scripts": scripts}


def load(path: Path = RECORDED) -> dict[str, Any]:
    return json.loads(path.read_text(encoding="utf-8"))  # type: ignore[no-any-return]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--merge", type=Path, help="another run's results.json to put in")
    parser.add_argument("--check", action="store_true", help="write nothing; fail if stale")
    args = parser.parse_args()
    results = load()
    if args.merge:
        results = merge(results, load(args.merge))
        RECORDED.write_text(json.dumps(results, indent=1) + "\n", encoding="utf-8")
    stale = [path for path, text in pages(results).items()
             if path.read_text(encoding="utf-8") != text]
    if args.check:
        for path in stale:
            print(f"{path.relative_to(ROOT)} is not what {RECORDED.relative_to(ROOT)} gives")
        return 1 if stale else 0
    for path, text in pages(results).items():
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
