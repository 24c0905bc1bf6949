"""vLLM's own stream generators against tokcore's vLLM plugin's, in this process, on the same
engine outputs: the CPU per streamed token (``make bench-vllm-inprocess``: run with the
Python of the Makefile's ``VLLM_VENV``, one venv per vLLM release, ``VLLM=0.32.0``,
``0.33.0`` or ``0.34.0``; not in ``make bench``).

Each stream is ``TOKENS`` one-token steps of text the tiny model of
tests/integration/_vllm_server.py could write (its made-up text, encoded and decoded by its
2048-token tokenizer, the one a real server of it runs: vLLM's cached copy), as vLLM's
engine hands them to the API server: a real ``RequestOutput`` a step, made with this
release's own ``RequestOutput`` and ``CompletionOutput``. With logprobs, each step's rows
(the sampled token and its 5 top tokens, numpy arrays as vLLM's engine sends them; the
sampled token the top one most of the time, as a greedy or low-temperature answer has it)
go through each side's own logprobs processor (vLLM's ``LogprobsProcessor``; the plugin's
tabled one, which a covered stream's requests get) before the stream is timed: what each
processor costs per token is printed apart. The cases (each asking ``include_usage``, as
``make bench-vllm`` does): plain chat, plain completions, chat with ``top_logprobs: 5`` and
completions with ``logprobs: 5``.

Timed: the thread CPU time (``time.thread_time``) of draining ``STREAMS`` streams in turn
through one side's generator (vLLM's own, called as vLLM's server calls it; the plugin's,
installed as its entry point installs it and called through vLLM's class, its coverage
decision included), in one event loop, the result generator a plain async generator over
the step's outputs (its cost is in both; what was alive before is frozen, ``gc.freeze``, so
that a collection walks what the timed code made), each chunk made bytes as Starlette's
``StreamingResponse`` makes it (vLLM's generators yield text, the plugin's bytes). The
rounds alternate the sides (their order turned each round); a first round warms both up
(the plugin's token table fills) and is not counted. Printed per case: each side's median
microseconds per token over the rounds, the ratio of the medians, each round's ratio, and
the goal's line (the plugin's at most ``GOAL`` times vLLM's own; in the parser cases, outside
the parser's calls).

The parser cases (``PARSER_CASES``, issue 50) are chat streams of servers with a parser, in
the same run: ``--reasoning-parser qwen3`` (the whole answer reasoning, never closed, as
the tiny model writes it: its template opens no ``<think>``), ``--reasoning-parser
deepseek_r1`` (reasoning, then ``</think>`` written in place of a token halfway, then
content), and ``--enable-auto-tool-choice --tool-call-parser hermes`` with ``tools`` in
the request (the tool model's tokenizer, with the parser's markers): the model's text
answer, and one tool call whose argument is a long text. Each server's parser class is
made as vLLM's ``OpenAIServingChat`` makes it (``ParserManager.get_parser``), a parser a
stream as its ``_make_parser`` makes it; both sides call the same parser object the same
way, and the parser's own calls (``parse_delta``, ``count_reasoning_tokens``) are timed
apart by one wrapper on the instance, the same on both sides. Printed beside each ratio:
the parser's CPU per token on each side, its share of vLLM's, and the ratio of what each
side spends outside the parser's calls, the goal's (issue 50: a writer that keeps vLLM's
parser can only remove what is around it).

``--record PATH`` merges this release's run into a JSON record holding one run per vLLM
release, its four plain cases under ``cases`` and the parser cases under ``parser cases``
(``docs/_static/bench/vllm-inprocess.json`` is the recorded one); ``--docs`` writes
the benchmarks page's section from that record (between its ``vllm-inprocess`` markers) and
the vLLM guide's table of releases from it and the real server's record
(``docs/_static/bench/vllm.json``, between its ``vllm-releases`` markers); ``--check``
fails if either is not what the records give: both without vLLM
(tests/integration/test_vllm_plugin.py runs the check).

Usage: python bench/bench_vllm_inprocess.py [--rounds N] [--record PATH]
       python bench/bench_vllm_inprocess.py --docs | --check
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import platform
import random
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

RUNNER = "own"  # not run by bench/report.py (make bench): it needs vLLM's venv
OWN_TARGET = "make bench-vllm-inprocess"

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RECORDED = ROOT / "docs" / "_static" / "bench" / "vllm-inprocess.json"
PAGE = ROOT / "docs" / "benchmarks.md"
MARKERS = ("<!-- vllm-inprocess: begin (bench/bench_vllm_inprocess.py --docs) -->",
           "<!-- vllm-inprocess: end -->")
TOKENS = 256
STREAMS = 16
TOP = 5
#: the plugin's generator's CPU per streamed token against vLLM's own, at most
GOAL = 0.35
CASES = {
    "chat": ("chat", {}),
    "completions": ("completions", {}),
    "chat logprobs 5": ("chat", {"logprobs": True, "top_logprobs": TOP}),
    "completions logprobs 5": ("completions", {"logprobs": TOP}),
}
SIDES = ("vllm", "plugin")
#: the parser cases, chat streams of a server with a parser (issue 50): its reasoning parser
#: (``--reasoning-parser``), its tool parser (``--enable-auto-tool-choice --tool-call-parser``,
#: ``tools`` in each request) and the answer (``reasoning``: the made-up text, which qwen3
#: reads as reasoning never closed; ``reasoning, content``: ``</think>`` written halfway;
#: ``text``: the tool model's text answer, the common path; ``call``: one hermes tool call,
#: its argument a long text). Recorded apart (``parser cases``), with the parser's share.
PARSER_CASES: dict[str, tuple[str | None, str | None, str]] = {
    "chat reasoning qwen3": ("qwen3", None, "reasoning"),
    "chat reasoning deepseek_r1": ("deepseek_r1", None, "reasoning, content"),
    "chat tools, text answer": (None, "hermes", "text"),
    "chat tool call": (None, "hermes", "call"),
}
TOOL_DEFS = [{"type": "function", "function": {
    "name": "write_note", "description": "keep a note",
    "parameters": {"type": "object", "properties": {"text": {"type": "string"}},
                   "required": ["text"]}}}]


class Bench:
    """This release's names, the tokenizer and the streams' steps, made once."""

    def __init__(self) -> None:
        sys.path.insert(0, str(ROOT / "tests" / "integration"))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from _vllm_server import PARSER_CALLS, RECIPE, CallClock, model
            from transformers import PreTrainedTokenizerFast
            from vllm.entrypoints.generate.base.protocol import RequestResponseMetadata
            from vllm.entrypoints.openai.chat_completion.protocol import ChatCompletionRequest
            from vllm.entrypoints.openai.chat_completion.serving import OpenAIServingChat
            from vllm.entrypoints.openai.completion.protocol import CompletionRequest
            from vllm.entrypoints.openai.completion.serving import OpenAIServingCompletion
            from vllm.outputs import CompletionOutput, RequestOutput
            from vllm.tokenizers.hf import get_cached_tokenizer
            from vllm.v1.engine.logprobs import LogprobsProcessor

        self.recipe = RECIPE
        self.Metadata, self.ChatRequest = RequestResponseMetadata, ChatCompletionRequest
        self.CompletionRequest = CompletionRequest
        self.Chat, self.Completion = OpenAIServingChat, OpenAIServingCompletion
        self.CompletionOutput, self.RequestOutput = CompletionOutput, RequestOutput
        self.Processor = LogprobsProcessor
        # vLLM's own generators, before the plugin is installed
        self.own = {"chat": vars(OpenAIServingChat)["chat_completion_stream_generator"],
                    "completions": vars(OpenAIServingCompletion)["completion_stream_generator"]}
        self.tokenizer = get_cached_tokenizer(PreTrainedTokenizerFast.from_pretrained(model()))
        self.tool_tokenizer = get_cached_tokenizer(
            PreTrainedTokenizerFast.from_pretrained(model(tools=True)))
        from tokcore.plugins import vllm as plugin

        if not plugin.install():
            raise SystemExit("the plugin does not install on this vLLM (its log line says why)")
        from tokcore.plugins._vllm_patch import installed

        ctx = installed()
        assert ctx is not None
        self.release = ctx.release.name
        from tokcore.plugins._vllm_processor import tabled_class

        self.tabled = tabled_class(LogprobsProcessor, ctx.names.append_logprobs_for_next_position,
                                   ctx.names.convert_ids_list_to_tokens)
        self.streams = [self._steps(random.Random(seed)) for seed in range(STREAMS)]
        self.by_case = {  # (the parser cases' streams; the plain cases' are ``streams``)
            case: [self._steps(random.Random(seed), self.case_tokenizer(case), answer)
                   for seed in range(STREAMS)]
            for case, (_, _, answer) in PARSER_CASES.items()}
        self.parser_clock = CallClock()  # (the parser cases: the parser's calls)
        self.parser_calls = PARSER_CALLS

    def case_tokenizer(self, case: str) -> Any:
        """The case's server's tokenizer: the tool model's with a tool parser."""
        return self.tool_tokenizer if case in PARSER_CASES and PARSER_CASES[case][1] else \
            self.tokenizer

    def _steps(self, rng: random.Random, tokenizer: Any = None, answer: str = "text"
               ) -> list[tuple[int, str, list[int], list[float], int]]:
        """A stream: per step its token, its text (the increment of the decoded text, special
        tokens kept, as a parser's server decodes it), its logprob rows (the sampled token
        first, then the top ones) and its rank. ``answer`` (``PARSER_CASES``): ``call``, the
        text is one hermes tool call whose argument is the made-up text; ``reasoning,
        content``, ``</think>`` takes the place of the token halfway."""
        tokenizer = tokenizer or self.tokenizer
        text = " ".join(_lines(rng))
        if answer == "call":
            while True:
                made = "<tool_call>\n" + json.dumps(
                    {"name": "write_note", "arguments": {"text": text}},
                    ensure_ascii=False) + "\n</tool_call>"
                if len(tokenizer.encode(made, add_special_tokens=False)) <= TOKENS:
                    text = made
                    break
                text = text[:len(text) * 9 // 10]
        ids = tokenizer.encode(text, add_special_tokens=False)[:TOKENS]
        if answer == "reasoning, content":
            ids[TOKENS // 2] = tokenizer.convert_tokens_to_ids("</think>")
        vocab = len(tokenizer)
        steps = []
        before = ""
        for k, token in enumerate(ids):
            now = tokenizer.decode(ids[:k + 1], skip_special_tokens=False)
            delta, before = (now[len(before):], now) if not now.endswith("\ufffd") else \
                ("", before)
            tops = [token] if rng.random() < 0.75 else []  # (greedy: the sampled one first)
            while len(tops) < TOP:
                candidate = min(int(rng.paretovariate(1.1)) - 1, vocab - 1)
                if candidate not in tops:
                    tops.append(candidate)
            values = sorted((rng.uniform(-12, 0) for _ in range(TOP)), reverse=True)
            sampled = values[0] if tops[0] == token else rng.uniform(-6, 0)
            steps.append((token, delta, [token, *tops], [sampled, *values],
                          1 if tops[0] == token else rng.randint(2, 40)))
        return steps

    def outputs(self, side: str, case: str) -> tuple[list[list[Any]], float]:
        """Each stream's engine outputs for one side, and its logprobs processor's thread
        CPU time (the sum over the streams)."""
        import numpy as np

        api, extra = CASES.get(case) or ("chat", {})
        logprobs = "logprobs" in extra
        made: list[list[Any]] = []
        spent = 0.0
        _settle()
        for s, steps in enumerate(self.by_case.get(case, self.streams)):
            processor = (self.tabled if side == "plugin" else self.Processor)(
                tokenizer=self.tokenizer, logprobs=[], prompt_logprobs=None,
                cumulative_logprob=0.0, num_logprobs=TOP, num_prompt_logprobs=None) \
                if logprobs else None
            stream = []
            for k, (token, delta, row_ids, row_lps, rank) in enumerate(steps):
                positions = None
                if processor is not None:
                    rows = (np.array([row_ids], dtype=np.int32),
                            np.array([row_lps], dtype=np.float32),
                            np.array([rank], dtype=np.int64), None)
                    start = time.thread_time()
                    processor._update_sample_logprobs(rows)
                    spent += time.thread_time() - start
                    positions = processor.logprobs[-1:]
                finish = "length" if k == len(steps) - 1 else None
                output = self.CompletionOutput(
                    index=0, text=delta, token_ids=[token], cumulative_logprob=None,
                    logprobs=positions, finish_reason=finish, stop_reason=None)
                res = self.RequestOutput(
                    request_id=f"r{s}", prompt="the prompt", prompt_token_ids=[1, 2, 3, 4],
                    prompt_logprobs=None, outputs=[output], finished=finish is not None,
                    num_cached_tokens=0)
                stream.append((0, res) if api == "completions" else res)
            made.append(stream)
        gc.unfreeze()
        return made, spent

    def serving(self, api: str, case: str) -> Any:
        """vLLM's serving object as a plain server has it (the attributes its generators
        read; both sides read the same object); a parser case's server has its parser class,
        made as vLLM's ``OpenAIServingChat`` makes it, and each parser (made as its
        ``_make_parser`` makes it) has its own calls timed: ``parse_delta`` and
        ``count_reasoning_tokens`` wrapped on the instance, the same wrapper for both
        sides."""
        cls = self.Chat if api == "chat" else self.Completion
        serving = object.__new__(cls)
        vars(serving).update(
            parser_cls=None, _include_reasoning_tokens_details=False, enable_log_outputs=False,
            enable_log_deltas=True, request_logger=None, response_role="assistant",
            enable_force_include_usage=False, system_fingerprint=None,
            enable_prompt_tokens_details=False, enable_per_request_metrics=False,
            return_tokens_as_token_ids=False, log_error_stack=False, enable_auto_tools=False)
        if case in PARSER_CASES:
            from vllm.parser import ParserManager

            reasoning, tool, _ = PARSER_CASES[case]
            vars(serving).update(
                parser_cls=ParserManager.get_parser(
                    tool_parser_name=tool, reasoning_parser_name=reasoning,
                    enable_auto_tools=tool is not None,
                    tokenizer=self.case_tokenizer(case)),
                enable_auto_tools=tool is not None,
                _include_reasoning_tokens_details=reasoning is not None, model_config=None)
            make = cls._make_parser
            clock = self.parser_clock

            def timed(request: Any, tokenizer: Any, kwargs: Any) -> Any:
                parser = make(serving, request, tokenizer, kwargs)
                for name in self.parser_calls:
                    setattr(parser, name, clock.timed(getattr(parser, name)))
                return parser

            serving._make_parser = timed
        return serving

    def run(self, side: str, case: str, streams: list[list[Any]]) -> tuple[float, int]:
        """The thread CPU seconds of draining the streams through one side's generator, and
        the bytes they wrote (a parser case: ``parser_clock`` holds its parser's share)."""
        api, extra = CASES.get(case) or ("chat", {})
        serving = self.serving(api, case)
        tokenizer = self.case_tokenizer(case)
        if case in PARSER_CASES and PARSER_CASES[case][1]:
            extra = {**extra, "tools": TOOL_DEFS}
        self.parser_clock.reset()
        generator = self.own[api] if side == "vllm" else \
            vars(self.Chat if api == "chat" else self.Completion)[
                "chat_completion_stream_generator" if api == "chat" else
                "completion_stream_generator"]
        options = {"stream": True, "stream_options": {"include_usage": True}, **extra}
        if api == "chat":
            request = self.ChatRequest.model_validate(
                {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], **options})
        else:
            request = self.CompletionRequest.model_validate(
                {"model": "tiny", "prompt": "the prompt", "max_tokens": TOKENS, **options})

        async def feed(items: list[Any]) -> Any:
            for item in items:
                yield item

        async def drain() -> tuple[float, int]:
            spent, size = 0.0, 0
            _settle()
            for s, stream in enumerate(streams):
                meta = self.Metadata(request_id=f"x{s}")
                start = time.thread_time()
                if api == "chat":
                    gen = generator(serving, request, feed(stream), f"chatcmpl-{s}", "tiny",
                                    [{"role": "user", "content": "hi"}], tokenizer, meta)
                else:
                    gen = generator(serving, request, [{}], feed(stream), f"cmpl-{s}",
                                    1700000000, "tiny", num_prompts=1,
                                    tokenizer=self.tokenizer, request_metadata=meta)
                async for chunk in gen:  # (as Starlette's StreamingResponse sends it)
                    size += len(chunk if isinstance(chunk, bytes) else chunk.encode("utf-8"))
                spent += time.thread_time() - start
            gc.unfreeze()
            return spent, size

        return asyncio.run(drain())


def _settle() -> None:
    """What is alive now collected and frozen (``gc.freeze``): a collection in the timed
    code then walks what that code made, not the whole bench's outputs, whichever side it
    falls on."""
    gc.collect()
    gc.freeze()


def _lines(rng: random.Random) -> list[str]:
    from _vllm_server import _text

    return list(_text(rng, 200))


def measure(bench: Bench, rounds: int, cases: Any = CASES) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for case in cases:
        tokens = sum(len(stream) for stream in bench.by_case.get(case, bench.streams))
        made = {side: bench.outputs(side, case) for side in SIDES}
        figures: dict[str, list[float]] = {side: [] for side in SIDES}
        parser: dict[str, list[float]] = {side: [] for side in SIDES}
        sizes = {}
        for round_ in range(-1, rounds):  # (-1: the warm-up, not counted)
            order = SIDES if round_ % 2 else SIDES[::-1]
            for side in order:
                spent, size = bench.run(side, case, made[side][0])
                sizes[side] = size
                if round_ >= 0:
                    figures[side].append(spent / tokens * 1e6)
                    parser[side].append(bench.parser_clock.nanoseconds / 1e3 / tokens)
        if sizes["vllm"] != sizes["plugin"]:
            raise SystemExit(f"{case}: the sides wrote {sizes['vllm']} and {sizes['plugin']} "
                             f"bytes: not the same streams")
        row: dict[str, Any] = {
            side: {"us per token": values, "median": statistics.median(values)}
            for side, values in figures.items()}
        row["ratio"] = row["plugin"]["median"] / row["vllm"]["median"]
        row["rounds"] = [p / v for p, v in zip(figures["plugin"], figures["vllm"],
                                               strict=True)]
        out[case] = row
        if case in PARSER_CASES:  # (the parser's share; the ratio outside its calls)
            for side in SIDES:
                outside = [v - pp for v, pp in zip(figures[side], parser[side], strict=True)]
                row[side].update({
                    "parser us per token": parser[side],
                    "parser median": statistics.median(parser[side]),
                    "outside the parser": outside,
                    "outside median": statistics.median(outside)})
            row["parser share"] = row["vllm"]["parser median"] / row["vllm"]["median"]
            row["ratio outside the parser"] = \
                row["plugin"]["outside median"] / row["vllm"]["outside median"]
            row["rounds outside the parser"] = [p / v for p, v in zip(
                row["plugin"]["outside the parser"], row["vllm"]["outside the parser"],
                strict=True)]
            print(f"  {case:<27} vLLM {row['vllm']['median']:6.2f} us/token (the parser "
                  f"{row['vllm']['parser median']:.2f}, {row['parser share']:.0%}), plugin "
                  f"{row['plugin']['median']:6.2f} (the parser "
                  f"{row['plugin']['parser median']:.2f}): {row['ratio']:.3f}x; outside "
                  f"the parser's calls {row['ratio outside the parser']:.3f}x (rounds "
                  f"{_rounds(row['rounds outside the parser'])})", flush=True)
            continue
        for side in SIDES:
            row[side]["processor us per token"] = made[side][1] / tokens * 1e6
        print(f"  {case:<27} vLLM {row['vllm']['median']:6.2f} us/token, plugin "
              f"{row['plugin']['median']:6.2f}: {row['ratio']:.3f}x (rounds "
              f"{_rounds(row['rounds'])})" + (
                  f"; logprobs processor vLLM {row['vllm']['processor us per token']:.2f}, "
                  f"plugin {row['plugin']['processor us per token']:.2f} us/token"
                  if CASES[case][1] else ""), flush=True)
    return out


def _rounds(ratios: list[float]) -> str:
    return ", ".join(f"{r:.2f}" for r in ratios)


def goal_lines(run: dict[str, Any]) -> tuple[list[str], bool]:
    """The goals' lines: the plugin's generator at most ``GOAL`` times vLLM's own CPU per
    streamed token, in the parser cases outside the parser's calls (the parser's share and
    the whole ratio beside it)."""
    lines, ok = [], True
    for case, row in run["cases"].items():
        met = row["ratio"] <= GOAL
        ok &= met
        lines.append(f"{'ok  ' if met else 'MISS'} vLLM {run['vllm']} {case}: the plugin's "
                     f"generator {row['ratio']:.3f}x vLLM's own CPU per streamed token "
                     f"(goal <= {GOAL}; rounds {_rounds(row['rounds'])})")
    for case, row in run.get("parser cases", {}).items():
        met = row["ratio outside the parser"] <= GOAL
        ok &= met
        lines.append(
            f"{'ok  ' if met else 'MISS'} vLLM {run['vllm']} {case}: the plugin's generator "
            f"{row['ratio outside the parser']:.3f}x vLLM's own CPU per streamed token outside "
            f"the parser's calls (goal <= {GOAL}; rounds "
            f"{_rounds(row['rounds outside the parser'])}; the parser "
            f"{row['vllm']['parser median']:.2f} of vLLM's {row['vllm']['median']:.2f} us a "
            f"token, {row['parser share']:.0%}; with it {row['ratio']:.3f}x)")
    return lines, ok


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
    sys.path.insert(0, str(ROOT / "bench"))
    from bench_vllm import commit

    bench = Bench()
    print(f"vLLM {bench.release}: {STREAMS} streams of {TOKENS} one-token steps a side, "
          f"{args.rounds} rounds; thread CPU per streamed token, median of the rounds:",
          flush=True)
    cases = measure(bench, args.rounds)
    parsers = measure(bench, args.rounds, PARSER_CASES)
    record = {"date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
              "tokcore": commit(ROOT), "vllm": bench.release, "machine": machine(),
              "streams": STREAMS, "tokens per stream": TOKENS, "rounds": args.rounds,
              "cases": cases, "parser cases": parsers}
    lines, ok = goal_lines(record)
    print("\n".join(lines))
    record["goals"] = lines
    if args.record:
        path = Path(args.record)
        runs = json.loads(path.read_text())["runs"] if path.exists() else {}
        runs[bench.release] = record
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({"runs": dict(sorted(runs.items()))}, indent=1) + "\n")
    return 0 if ok else 1


def section(recorded: dict[str, Any]) -> str:
    """The benchmarks page's in-process section (between its markers), from the record: the
    plain cases' table, then the parser cases' (the parser's share of each side, the ratio
    outside the parser's calls and the whole one)."""
    rows = ["| vLLM | case | vLLM's generator | the plugin's | x vLLM's | rounds' ratios | "
            "logprobs processor, vLLM's / the plugin's |",
            "| --- | --- | --- | --- | --- | --- | --- |"]
    parsed = ["| vLLM | case | vLLM's generator (the parser) | the plugin's (the parser) | "
              "the parser's share of vLLM's | x vLLM's outside the parser | rounds' ratios "
              "outside the parser | x vLLM's with the parser |",
              "| --- | --- | --- | --- | --- | --- | --- | --- |"]
    heads, goals = [], []
    for release, run in recorded["runs"].items():
        m = run["machine"]
        heads.append(f"- vLLM {release}: run of {run['date']}, tokcore at commit "
                     f"{run['tokcore']}, {m['cpu']} ({m['cores']} cores, load {m['load']}), "
                     f"Python {m['python']}; {run['streams']} streams of "
                     f"{run['tokens per stream']} tokens a side, {run['rounds']} rounds.")
        for case, row in run["cases"].items():
            processor = f"{row['vllm']['processor us per token']:.2f} / " \
                f"{row['plugin']['processor us per token']:.2f} us" \
                if CASES[case][1] else ""
            rows.append(f"| {release} | {case} | {row['vllm']['median']:.2f} us | "
                        f"{row['plugin']['median']:.2f} us | {row['ratio']:.2f} | "
                        f"{min(row['rounds']):.2f}-{max(row['rounds']):.2f} | {processor} |")
        for case, row in run.get("parser cases", {}).items():
            v, p, outside = row["vllm"], row["plugin"], row["rounds outside the parser"]
            parsed.append(
                f"| {release} | {case} | {v['median']:.2f} us ({v['parser median']:.2f}) | "
                f"{p['median']:.2f} us ({p['parser median']:.2f}) | "
                f"{row['parser share']:.0%} | {row['ratio outside the parser']:.2f} | "
                f"{min(outside):.2f}-{max(outside):.2f} | {row['ratio']:.2f} |")
        goals += [f"- {line}" for line in run["goals"]]
    tables = [*rows, ""]
    if len(parsed) > 2:
        tables += ["Chat with a parser (`--reasoning-parser qwen3`, the whole answer "
                   "reasoning; `deepseek_r1`, reasoning then content; `--tool-call-parser "
                   "hermes` with `tools` in the request, a text answer and a tool call): both "
                   "generators call the same vLLM parser object the same way, and its calls "
                   "are timed apart (in brackets, microseconds per token); the goal is on "
                   "what each side spends outside them.", "", *parsed, ""]
    return "\n".join([MARKERS[0], *heads, "", *tables, "The goals (the plugin's generator "
                      "against vLLM's own, the same run):", "", *goals, MARKERS[1]])


def page(recorded: dict[str, Any], text: str) -> str:
    start, end = text.index(MARKERS[0]), text.index(MARKERS[1]) + len(MARKERS[1])
    return text[:start] + section(recorded) + text[end:]


#: the vLLM guide's table of releases (written from the records, between these markers)
GUIDE = ROOT / "docs" / "guides" / "vllm.md"
SERVER_RECORD = ROOT / "docs" / "_static" / "bench" / "vllm.json"
GUIDE_MARKERS = ("<!-- vllm-releases: begin (bench/bench_vllm_inprocess.py --docs) -->",
                 "<!-- vllm-releases: end -->")
#: what the plugin writes itself on each release (the rest is vLLM's own generator)
COVERED = {
    "0.32.0": "chat with no parser, or the reasoning parsers `deepseek_r1`, `deepseek_v3`, "
              "`qwen3` and the tool parsers `hermes`, `llama3_json` (`tool_choice` auto, "
              "required, named); completions (the list above)",
    "0.33.0": "as 0.32.0, but `return_weight_versions` and, for completions, "
              "`--enable-log-outputs` stay vLLM's",
    "0.34.0": "as 0.33.0",
}


def guide_table(recorded: dict[str, Any], server: dict[str, Any]) -> str:
    """The guide's table: each release, what it covers, how it is tested, the in-process
    ratios and, for the release that runs a real server here, the real server's."""
    cases = list(CASES)
    rows = ["| vLLM | the plugin writes | tested | in-process, x vLLM's own generator "
            f"({', '.join(cases)}) | real server, x the plugin off |",
            "| --- | --- | --- | --- | --- |"]
    for release, run in recorded["runs"].items():
        ratios = ", ".join(f"{run['cases'][case]['ratio']:.2f}" for case in cases)
        if release == server["vllm"]:
            tested = "in-process and a real `vllm serve` (the CPU wheel)"
            real = "; ".join(
                f"{case} {modes['generator']['api median'] / modes['off']['api median']:.2f}"
                for case, modes in server["cases"].items())
        else:
            tested = "in-process (the CUDA wheel's Python on a CPU)"
            real = "no CPU wheel: not run here"
        rows.append(f"| {release} | {COVERED.get(release, '?')} | {tested} | {ratios} | {real} |")
    dates = ", ".join(f"{release}: {run['date']}" for release, run in recorded["runs"].items())
    return "\n".join([GUIDE_MARKERS[0], *rows, "", f"In-process runs ({dates}; "
                      "`make bench-vllm-inprocess`), real-server run of "
                      f"{server['date']} (`make bench-vllm`): the {{doc}}`../benchmarks` page "
                      "has every figure.", GUIDE_MARKERS[1]])


def guide(recorded: dict[str, Any], server: dict[str, Any], text: str) -> str:
    start = text.index(GUIDE_MARKERS[0])
    end = text.index(GUIDE_MARKERS[1]) + len(GUIDE_MARKERS[1])
    return text[:start] + guide_table(recorded, server) + text[end:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--record", help="merge this release's run into this JSON record")
    parser.add_argument("--docs", action="store_true",
                        help="write the benchmarks page's section and the vLLM guide's "
                             "table from the recorded runs")
    parser.add_argument("--check", action="store_true",
                        help="fail if the benchmarks page or the guide is not the records'")
    args = parser.parse_args()
    if args.docs or args.check:
        recorded = json.loads(RECORDED.read_text())
        server = json.loads(SERVER_RECORD.read_text())
        text, guide_text = PAGE.read_text(), GUIDE.read_text()
        if args.check:
            return 0 if page(recorded, text) == text and \
                guide(recorded, server, guide_text) == guide_text else 1
        PAGE.write_text(page(recorded, text))
        GUIDE.write_text(guide(recorded, server, guide_text))
        return 0
    return run(args)


if __name__ == "__main__":
    sys.exit(main())
