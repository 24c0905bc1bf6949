"""A real vLLM API server's CPU per streamed token, with tokcore's vLLM plugin off and on
(``make bench-vllm``: vLLM's CPU wheel in the Makefile's ``VLLM_VENV``, one venv per vLLM
release outside the tree; not in ``make bench``).

For each server configuration (``SERVERS``: plain, the qwen3 reasoning parser, the hermes
tool parser), two ``vllm serve`` of the tiny model of tests/integration/_vllm_server.py run
side by side on loopback: the plugin off and on (``TOKCORE_VLLM_PLUGIN=generator``), each with
``--lockstep`` (``_vllm_server.lockstep``: every engine step one chunk of each stream, as an
API server that keeps up with its engine writes them; vLLM itself merges the steps a lagging
API server has not taken yet, and with a model this small the engine is as fast as the API
server, so that a side that keeps up better would write more chunks for the same tokens and
be charged more per token). Once they answer, every thread of each API server's process and
of this load client is pinned to one core and every thread of the engine's processes (the
engine core and its worker) to the other, again before each measured load (threads made
since are pinned too). Then, in each round, the servers are driven in turn (the order
rotated from round to round) with ``CONCURRENCY`` concurrent streams of ``TOKENS`` tokens
each (``ignore_eos`` and ``min_tokens``: every stream that long), ``--requests`` per case,
for each case of that configuration (``CASES``): plain chat streams, plain completions
streams, completions with ``logprobs: 5``, chat with ``top_logprobs: 5``, chat on the
reasoning server, chat with tools on the tool server (a text answer: ``CASES``), each
greedy (one prompt, temperature 0) and sampled (temperature 1, a seed per stream, the
prompts of ``PROMPTS`` in turn: the contexts of vLLM's corrections of partial characters
recur less), each asking ``include_usage`` (its tokens are counted from the final usage
chunk). A first round, the same load, warms every server and case up and is not counted.
The API server's CPU is its utime + stime from ``/proc/<pid>/stat`` (all its threads, in
clock ticks: the default 64 streams a load make about 100 ticks) read right before the load
and ``SETTLE`` seconds after its last byte (the server's work on the requests after that),
divided by the streamed tokens; the engine's processes' CPU is
reported apart. Printed per round: each load's figures and each case's ratio (on/off);
then per case and side the median of the rounds and their spread (lowest, highest), and
each goal's line (the plugin on against off, same run; the ratio of the medians, and each
round's ratio).

A server with a parser (``SERVERS``) then runs one more round of each of its cases, the
parser round, not counted in the goals: the servers time their parsers' own calls
(``_vllm_server.parser_clock``: vLLM's ``parse_delta`` and ``count_reasoning_tokens``, the
thread CPU time of each call, both sides the same wrapper) while the same load runs. Its
line gives what vLLM's parser costs in a real API server per streamed token on each side
and the ratio outside its calls: the part of the server the plugin can change. Both sides
call the same parser the same way, so the parser's cost is a floor under the ratio.

``TOKCORE_VLLM_TREE`` names another source tree whose ``tokcore`` the servers import (its
in-place build), default this one. ``--record PATH`` writes the run as JSON
(``docs/_static/bench/vllm.json`` is the recorded run); ``--docs`` writes the section of
docs/benchmarks.md from the recorded run (between its ``vllm-table`` markers) and
``--check`` fails if the page is not what the record gives: both without vLLM
(tests/test_docs.py imports this module).

Usage: python bench/bench_vllm.py [--rounds N] [--requests N] [--cases CASE...]
                                  [--record PATH]
       python bench/bench_vllm.py --docs | --check
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import platform
import statistics
import sys
import time
from pathlib import Path
from typing import Any

RUNNER = "own"  # not run by bench/report.py (make bench): it needs vLLM's venv
OWN_TARGET = "make bench-vllm"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "docs" / "_static" / "bench" / "vllm.json"
PAGE = ROOT / "docs" / "benchmarks.md"
MARKERS = ("<!-- vllm-table: begin (bench/bench_vllm.py --docs) -->",
           "<!-- vllm-table: end -->")
MODES = {"off": None, "generator": "generator"}
CONCURRENCY = 16
TOKENS = 256
#: seconds waited after a load's last byte before the API server's CPU is read
SETTLE = 0.25
#: the servers, each a pair (the plugin off and on): what ``vllm serve`` adds, and whether it
#: serves the tool servers' model (tests/integration/_vllm_server.py's ``TOOL_RECIPE``, whose
#: tokenizer has hermes's tokens); Qwen3's recipe turns on the qwen3 reasoning parser, and
#: the tool servers of most recipes hermes
SERVERS: dict[str, tuple[list[str], bool]] = {
    "plain": ([], False),
    "qwen3 reasoning": (["--reasoning-parser", "qwen3"], False),
    "hermes tools": (["--enable-auto-tool-choice", "--tool-call-parser", "hermes"], True),
}
CHAT, COMPLETIONS = "/v1/chat/completions", "/v1/completions"
TOOLS = "tools"  # (a request key: the tool servers' tools, _vllm_server.TOOL_DEFS)
#: the cases: their server, path, what their requests add, and whether they sample
#: (temperature 1, a seed per stream, the prompts in turn) or decode greedily (one prompt).
#: The reasoning server's random model writes reasoning, and most of its streams close it
#: (``</think>`` wins where the model would write " the") and go on with content;
#: the tool server's requests carry tools (tool_choice auto) and its model answers text, the
#: common path of a tool server: the requests bias ``<tool_call>`` away (``logit_bias``), as
#: the random model would otherwise open a call some way in and never close it (the parser
#: then holds every later token: a greedy stream of 256 tokens wrote 77 chunks)
CASES: dict[str, tuple[str, str, dict[str, Any], bool]] = {
    "chat": ("plain", CHAT, {}, False),
    "completions": ("plain", COMPLETIONS, {}, False),
    "completions logprobs 5": ("plain", COMPLETIONS, {"logprobs": 5}, False),
    "chat top_logprobs 5": ("plain", CHAT, {"logprobs": True, "top_logprobs": 5}, False),
    "chat sampled": ("plain", CHAT, {}, True),
    "completions sampled": ("plain", COMPLETIONS, {}, True),
    "completions logprobs 5 sampled": ("plain", COMPLETIONS, {"logprobs": 5}, True),
    "chat top_logprobs 5 sampled": ("plain", CHAT, {"logprobs": True, "top_logprobs": 5},
                                    True),
    "chat qwen3 reasoning": ("qwen3 reasoning", CHAT, {}, False),
    "chat qwen3 reasoning sampled": ("qwen3 reasoning", CHAT, {}, True),
    "chat hermes tools": ("hermes tools", CHAT, {TOOLS: True}, False),
    "chat hermes tools sampled": ("hermes tools", CHAT, {TOOLS: True}, True),
}
#: the plugin's API server CPU per streamed token against the plugin off's, at most
GOALS = {"chat": 0.65, "completions": 0.72, "completions logprobs 5": 0.5,
         "chat top_logprobs 5": 0.5, "chat sampled": 0.65, "completions sampled": 0.72,
         "completions logprobs 5 sampled": 0.5, "chat top_logprobs 5 sampled": 0.5,
         "chat qwen3 reasoning": 0.7, "chat qwen3 reasoning sampled": 0.7,
         "chat hermes tools": 0.75, "chat hermes tools sampled": 0.75}
PROMPT = "the engine writes the token stream to the server and the server writes it out"
#: the sampled streams' prompts, in turn (each stream its own seed)
PROMPTS = (PROMPT, "tell me about the café and the naïve 中文 words 🙂",
           'write "quotes" and \\back\\slashes, then a list: 1, 2, 3',
           "the model of the day is small and it writes a long answer to every question")


@functools.cache
def special_id(token: str) -> int:
    """The id of one of the tool servers' model's special tokens (its tokenizer's)."""
    from _vllm_server import model_dir

    added = json.loads((model_dir(tools=True) / "tokenizer.json").read_text())["added_tokens"]
    return next(entry["id"] for entry in added if entry["content"] == token)


def body(case: str, k: int) -> dict[str, Any]:
    """The ``k``-th request of a load of this case."""
    from _vllm_server import TOOL_DEFS

    _, path, extra, sampled = CASES[case]
    request: dict[str, Any] = {"model": "tiny", "max_tokens": TOKENS, "min_tokens": TOKENS,
                               "ignore_eos": True, "temperature": 0, "stream": True,
                               "stream_options": {"include_usage": True}, **extra}
    if request.pop(TOOLS, False):
        request["tools"] = TOOL_DEFS
        request["logit_bias"] = {str(special_id("<tool_call>")): -100}
    prompt = PROMPT
    if sampled:
        request.update(temperature=1.0, seed=1000 + k)
        prompt = PROMPTS[k % len(PROMPTS)]
    if path.endswith("chat/completions"):
        request["messages"] = [{"role": "user", "content": prompt}]
    else:
        request["prompt"] = prompt
    return request


async def one(client: Any, url: str, request: dict[str, Any]) -> tuple[int, int]:
    """One stream read whole; its completion tokens (from the final usage chunk) and its
    events."""
    async with client.stream("POST", url, json=request) as response:
        data = b"".join([part async for part in response.aiter_raw()])
    if response.status_code != 200:
        raise RuntimeError(f"{url}: {response.status_code} {data[:500]!r}")
    usage = data[:data.rindex(b"\n\ndata: [DONE]")]
    usage = usage[usage.rindex(b"data: ") + 6:]
    tokens: int = json.loads(usage)["usage"]["completion_tokens"]
    return tokens, data.count(b"\n\ndata: ") + 1


async def load(url: str, case: str, requests: int) -> tuple[int, int]:
    """``requests`` streams, ``CONCURRENCY`` at a time; the tokens and events streamed."""
    import httpx

    path = CASES[case][1]
    gate = asyncio.Semaphore(CONCURRENCY)

    async def gated(client: Any, k: int) -> tuple[int, int]:
        async with gate:
            return await one(client, url + path, body(case, k))

    limits = httpx.Limits(max_connections=CONCURRENCY, max_keepalive_connections=CONCURRENCY)
    async with httpx.AsyncClient(timeout=httpx.Timeout(600.0), limits=limits) as client:
        counts = await asyncio.gather(*(gated(client, k) for k in range(requests)))
    if {tokens for tokens, _ in counts} != {TOKENS}:
        raise RuntimeError(f"streams of {sorted({t for t, _ in counts})} tokens, not {TOKENS}")
    return sum(tokens for tokens, _ in counts), sum(events for _, events in counts)


def pin(pid: int, cpu: int) -> None:
    """Every thread of the process on one CPU (threads made later inherit it)."""
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            os.sched_setaffinity(int(task.name), {cpu})
        except (ProcessLookupError, PermissionError):
            pass


def pin_all(servers: dict[str, Any], api_cpu: int, engine_cpu: int) -> None:
    """Every thread of every API server and of this process on ``api_cpu``, every thread of
    every engine process on ``engine_cpu``."""
    pin(os.getpid(), api_cpu)
    for server in servers.values():
        pin(server.pid, api_cpu)
        for pid in server.engine_pids():
            pin(pid, engine_cpu)


def measure(servers: dict[str, Any], rounds: int, requests: int, api_cpu: int,
            engine_cpu: int, cases: list[str]) -> dict[str, Any]:
    from _vllm_server import cpu_seconds

    figures: dict[str, dict[str, dict[str, list[float]]]] = {
        case: {mode: {"api": [], "engine": [], "wall": [], "events": [], "parser": []}
               for mode in servers}
        for case in cases}
    names = list(servers)
    for round_ in range(-1, rounds):  # round 0: the warm-up, the same load, not counted
        order = names[round_ % len(names):] + names[:round_ % len(names)]
        for case in cases:
            for mode in order:
                server = servers[mode]
                engine = server.engine_pids()
                pin_all(servers, api_cpu, engine_cpu)  # (threads made since: pinned too)
                api0 = cpu_seconds(server.pid)
                engine0 = sum(map(cpu_seconds, engine))
                wall0 = time.monotonic()
                tokens, events = asyncio.run(load(server.url, case, requests))
                wall = time.monotonic() - wall0
                time.sleep(SETTLE)  # the server's work after the last byte: its requests'
                api = cpu_seconds(server.pid) - api0
                engine_cpu_s = sum(map(cpu_seconds, engine)) - engine0
                if round_ < 0:
                    print(f"  warm-up {case:<30} {mode:<10} API server "
                          f"{api / tokens * 1e6:7.1f} ms/1k tokens (not counted)", flush=True)
                    continue
                row = figures[case][mode]
                row["api"].append(api / tokens * 1e3)
                row["engine"].append(engine_cpu_s / tokens * 1e3)
                row["wall"].append(tokens / wall)
                row["events"].append(events / requests)
                print(f"  round {round_ + 1} {case:<30} {mode:<10} API server "
                      f"{api / tokens * 1e6:7.1f} ms/1k tokens, engine "
                      f"{engine_cpu_s / tokens * 1e6:7.1f} ms/1k, {tokens / wall:7.0f} tokens/s, "
                      f"{events / requests:.0f} events a stream",
                      flush=True)
            if round_ >= 0 and "off" in servers and "generator" in servers:
                ratio = figures[case]["generator"]["api"][-1] / figures[case]["off"]["api"][-1]
                print(f"  round {round_ + 1} {case:<30} generator/off {ratio:.3f}", flush=True)
    for case in cases:  # the parser round (a server with a parser: its parsers' calls timed)
        for mode in names:
            server = servers[mode]
            if not server.parser_clock:
                continue
            pin_all(servers, api_cpu, engine_cpu)
            server.clock_parsers()
            api0 = cpu_seconds(server.pid)
            tokens, _ = asyncio.run(load(server.url, case, requests))
            time.sleep(SETTLE)
            api = cpu_seconds(server.pid) - api0
            parser, calls = server.parser_time()
            figures[case][mode]["parser"] = [api / tokens, parser / tokens, calls / tokens]
            print(f"  parser round {case:<30} {mode:<10} API server "
                  f"{api / tokens * 1e6:7.1f} ms/1k tokens, vLLM's parser "
                  f"{parser / tokens * 1e6:6.1f} ms/1k ({calls / tokens:.2f} calls a token)",
                  flush=True)
    return figures


def summary(figures: dict[str, Any]) -> dict[str, Any]:
    """Medians, spreads and the goals' ratios of the measured rounds (seconds per token)."""
    out: dict[str, Any] = {}
    for case, modes in figures.items():
        out[case] = {}
        for mode, row in modes.items():
            out[case][mode] = {
                "api ms per 1k tokens": [v * 1e3 for v in row["api"]],
                "api median": statistics.median(row["api"]) * 1e3,
                "engine ms per 1k tokens": [v * 1e3 for v in row["engine"]],
                "engine median": statistics.median(row["engine"]) * 1e3,
                "tokens per second": row["wall"], "events per stream": row["events"]}
            if row["parser"]:
                api, parser, calls = row["parser"]
                out[case][mode]["parser round"] = {
                    "api ms per 1k tokens": api * 1e6, "parser ms per 1k tokens": parser * 1e6,
                    "parser calls per token": calls}
    return out


def outside(modes: dict[str, Any]) -> str:
    """The parser round's figures, for a goal's line: what vLLM's parser costs on each side
    and the ratio outside its calls ("" without a parser round)."""
    rounds = [modes[mode].get("parser round") for mode in ("off", "generator")]
    if None in rounds:
        return ""
    off, on = rounds
    rest = (on["api ms per 1k tokens"] - on["parser ms per 1k tokens"]) / \
        (off["api ms per 1k tokens"] - off["parser ms per 1k tokens"])
    return (f"; parser round: vLLM's parser {off['parser ms per 1k tokens']:.1f} of "
            f"{off['api ms per 1k tokens']:.1f} ms/1k tokens off, "
            f"{on['parser ms per 1k tokens']:.1f} of {on['api ms per 1k tokens']:.1f} on; "
            f"outside its calls {rest:.3f}")


def goal_lines(record: dict[str, Any]) -> tuple[list[str], bool]:
    lines, ok = [], True
    for case, goal in GOALS.items():
        if case not in record["cases"]:
            continue
        modes = record["cases"][case]
        if "generator" not in modes or "off" not in modes:
            lines.append(f"  MISSING {case}: no generator or plugin-off figures")
            ok = False
            continue
        ratio = modes["generator"]["api median"] / modes["off"]["api median"]
        rounds = [g / o for g, o in zip(modes["generator"]["api ms per 1k tokens"],
                                        modes["off"]["api ms per 1k tokens"])]
        verdict = "ok  " if ratio <= goal else "MISS"
        ok &= ratio <= goal
        lines.append(f"  {verdict} API server CPU per streamed token, {case}, "
                     f"generator/off: {ratio:.3f} (goal <= {goal}; rounds "
                     f"{', '.join(f'{r:.2f}' for r in rounds)}{outside(modes)})")
    return lines, ok


def table(record: dict[str, Any]) -> list[str]:
    lines = [f"  {'case':<30} {'mode':<10} {'API server ms/1k tokens':>24} "
             f"{'(lowest-highest)':>18} {'engine ms/1k':>13} {'x off':>7}"]
    for case, modes in record["cases"].items():
        off = modes.get("off", {}).get("api median")
        for mode, row in modes.items():
            values = row["api ms per 1k tokens"]
            ratio = f"{row['api median'] / off:.3f}" if off else ""
            lines.append(f"  {case:<30} {mode:<10} {row['api median']:24.1f} "
                         f"{f'({min(values):.1f}-{max(values):.1f})':>18} "
                         f"{row['engine median']:13.1f} {ratio:>7}")
    return lines


def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cpu": cpu, "cores": os.cpu_count(), "system": f"{platform.system()} "
            f"{platform.release()}", "python": platform.python_version(),
            "load": " ".join(f"{x:.1f}" for x in os.getloadavg())}


def run(args: argparse.Namespace) -> int:
    sys.path.insert(0, str(ROOT / "tests" / "integration"))
    from importlib.metadata import version

    from _vllm_server import RECIPE, Server

    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) < 2:
        raise SystemExit("bench_vllm needs two CPUs: the API servers and the engines apart")
    api_cpu, engine_cpu = cpus[0], cpus[1]
    env = {"VLLM_CPU_OMP_THREADS_BIND": str(engine_cpu)}
    tree = os.environ.get("TOKCORE_VLLM_TREE") or None  # another tree's tokcore, if named
    cases = args.cases or list(CASES)
    figures: dict[str, Any] = {}
    for name, (extra_args, tools) in SERVERS.items():
        theirs = [case for case in cases if CASES[case][0] == name]
        if not theirs:
            continue
        servers = {mode: Server(switch, extra_args, env=env, pythonpath=tree, lockstep=True,
                                tools=tools, parser_clock=name != "plain")
                   for mode, switch in MODES.items()}
        try:
            for server in servers.values():
                server.spawn()
            for server in servers.values():
                server.wait()
            pin_all(servers, api_cpu, engine_cpu)
            for mode, server in servers.items():
                print(f"  {name} {mode}: API server pid {server.pid} on CPU {api_cpu}, "
                      f"engine pids {server.engine_pids()} on CPU {engine_cpu}", flush=True)
            figures.update(measure(servers, args.rounds, args.requests, api_cpu, engine_cpu,
                                   theirs))
        finally:
            for server in servers.values():
                server.stop()
    figures = {case: figures[case] for case in cases}  # (in the order asked)
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "tokcore": commit(Path(tree or ROOT)),
              "vllm": version("vllm-cpu") if _has("vllm-cpu") else version("vllm"),
              "torch": version("torch"), "machine": machine(), "model": RECIPE,
              "servers": {CASES[case][0]: SERVERS[CASES[case][0]][0] for case in cases},
              "concurrency": CONCURRENCY, "tokens per stream": TOKENS,
              "requests per round": args.requests, "rounds": args.rounds,
              "cases": summary(figures)}
    print(f"vLLM {record['vllm']} (CPU wheel), {CONCURRENCY} concurrent streams of {TOKENS} "
          f"tokens, {args.requests} a round, {args.rounds} rounds; CPU per 1k streamed "
          f"tokens, median of the rounds:")
    print("\n".join(table(record)))
    lines, ok = goal_lines(record)
    print("\n".join(lines))
    record["goals"] = [line.strip() for line in lines]
    if args.record:
        Path(args.record).write_text(json.dumps(record, indent=1) + "\n")
    return 0 if ok else 1


def commit(tree: Path) -> str:
    """The tree's commit (``+dirty`` when its tracked files differ from it)."""
    import subprocess

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(tree), *args], capture_output=True, text=True,
                              check=True).stdout.strip()

    return git("rev-parse", "--short", "HEAD") + ("+dirty" if git("status", "--porcelain",
                                                                  "-uno") else "")


def _has(dist: str) -> bool:
    from importlib.metadata import PackageNotFoundError, version

    try:
        version(dist)
    except PackageNotFoundError:
        return False
    return True


def section(record: dict[str, Any]) -> str:
    """The benchmarks page's vLLM section (between its markers), from a recorded run."""
    m = record["machine"]
    load = f", load {m['load']}" if "load" in m else ""
    head = (f"Run of {record['date']} on {m['cpu']} ({m['cores']} cores{load}, {m['system']}, "
            f"Python {m['python']}), tokcore at commit {record['tokcore']}, vLLM "
            f"{record['vllm']} (CPU wheel, torch "
            f"{record['torch']}): {record['concurrency']} concurrent streams of "
            f"{record['tokens per stream']} tokens, {record['requests per round']} streams a "
            f"round, {record['rounds']} rounds; the API server's CPU (its utime + stime) per "
            f"1k streamed tokens, median of the rounds and their range; the engine's "
            f"processes apart.")
    rows = ["| case | plugin | API server CPU per 1k tokens | rounds' range | x plugin off "
            "| engine CPU per 1k tokens |", "| --- | --- | --- | --- | --- | --- |"]
    for case, modes in record["cases"].items():
        off = modes["off"]["api median"]
        for mode, row in modes.items():
            values = row["api ms per 1k tokens"]
            name = "off" if mode == "off" else f"`TOKCORE_VLLM_PLUGIN={mode}`"
            rows.append(f"| {case} | {name} | {row['api median']:.1f} ms | "
                        f"{min(values):.1f}-{max(values):.1f} ms | "
                        f"{row['api median'] / off:.2f} | {row['engine median']:.1f} ms |")
    goals = [f"- {line}" for line in record["goals"]]
    return "\n".join([MARKERS[0], head, "", *rows, "", "The goals (the generator mode "
                      "against the plugin off, the same run):", "", *goals, MARKERS[1]])


def page(record: dict[str, Any], text: str) -> str:
    start, end = text.index(MARKERS[0]), text.index(MARKERS[1]) + len(MARKERS[1])
    return text[:start] + section(record) + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--cases", nargs="+", choices=list(CASES),
                        help="these cases only (default: all)")
    parser.add_argument("--requests", type=int, default=64, help="streams a round, per case")
    parser.add_argument("--record", help="write the run as JSON here")
    parser.add_argument("--docs", action="store_true",
                        help="write the benchmarks page's section from the recorded run")
    parser.add_argument("--check", action="store_true",
                        help="fail if the benchmarks page is not the recorded run's")
    args = parser.parse_args()
    if args.docs or args.check:
        record = json.loads(RECORDED.read_text())
        text = PAGE.read_text()
        if args.check:
            return 0 if page(record, text) == text else 1
        PAGE.write_text(page(record, text))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
