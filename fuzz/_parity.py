"""What every fuzz harness shares: the twins, outcome comparison, input decoding, the entry.

A harness is ``fuzz/fuzz_<name>.py`` with a ``test_one_input(data: bytes)`` that decodes
``data`` into arguments with :class:`Draw`, runs every loaded twin on them through
:func:`same_outcome`, and checks the contract (oracles) on top. It raises on any finding.
The same function serves three masters:

- atheris/libFuzzer (``python fuzz/fuzz_x.py [libFuzzer flags]``), coverage-guided;
- ``--random SECONDS``: plain random inputs from :mod:`random`, for machines without atheris
  (honestly a random smoke test, not coverage-guided fuzzing);
- ``tests/test_fuzz_corpus.py``, which replays every kept input in ``make test``.

Nothing here imports tokcore at module level, so that a harness run as a fuzzer can import the
package under atheris' instrumentation hook first.
"""

from __future__ import annotations

import contextlib
import importlib
import os
import random
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parent
if str(ROOT) not in sys.path:  # the harnesses import the in-place build of the source tree
    sys.path.insert(0, str(ROOT))

#: where the inputs that found bugs are kept (replayed by the tests): corpus/<harness>/
CORPUS_DIR = FUZZ_DIR / "corpus"
#: hand-written starting inputs: seeds/<harness>/
SEEDS_DIR = FUZZ_DIR / "seeds"


class Finding(AssertionError):
    """A twin disagreed with the other twin, with an oracle, or with the contract."""


class HostileError(Exception):
    """Raised on purpose by the hostile objects a harness builds; must propagate as is."""


# --- twins ---------------------------------------------------------------------------------

def load_twins(name: str) -> dict[str, ModuleType]:
    """``{"c": tokcore._<name>_c, "py": tokcore._<name>_py}``, minus ``c`` without extensions.

    Outside TOKCORE_NO_EXTENSIONS a missing Cython twin is an error, never a quiet skip.
    """
    from tokcore._backend import NO_EXTENSIONS

    twins = {"py": importlib.import_module(f"tokcore._{name}_py")}
    if not NO_EXTENSIONS:
        twins = {"c": importlib.import_module(f"tokcore._{name}_c"), **twins}
    return twins


def missing_hot_paths(harness_file: Path) -> list[str]:
    """``tokcore/_<x>_py.py`` files that a harness loads twins from and that do not exist.

    A hot path that has not landed in this tree yet cannot be fuzzed (that is reported, not
    hidden); one whose Python twin exists but whose Cython twin fails to import is an error.
    """
    import re

    names = re.findall(r'load_twins\("(\w+)"\)', harness_file.read_text())
    return [f"tokcore/_{n}_py.py" for n in names
            if not (ROOT / "tokcore" / f"_{n}_py.py").exists()]


@contextlib.contextmanager
def instrumented(active: bool) -> Iterator[None]:
    """Import tokcore under atheris' coverage hook when running as a fuzzer."""
    if active and _atheris() is not None:
        with _atheris().instrument_imports(include=["tokcore"]):
            yield
    else:
        yield


def _atheris() -> Any:
    try:
        import atheris
    except ImportError:
        return None
    return atheris


# --- outcomes ------------------------------------------------------------------------------

class Raised:
    """An exception as an outcome: compared by type only (messages may differ in wording)."""

    def __init__(self, exc: BaseException) -> None:
        self.type = type(exc)
        self.exc = exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raised) and other.type is self.type

    def __repr__(self) -> str:
        return f"Raised({self.type.__name__}: {self.exc})"


def outcome(call: Callable[[], Any]) -> Any:
    """The result of ``call()``, or a :class:`Raised` for the exception it raised."""
    try:
        return call()
    except Exception as exc:  # every exception is data here; the checks judge it
        return Raised(exc)


def same_outcome(twins: dict[str, ModuleType], call: Callable[[ModuleType], Any],
                 allowed: Sequence[type[BaseException]], what: str) -> Any:
    """Run ``call(twin)`` on every twin; they must agree in value, type, or exception type.

    Returns the common outcome. An exception outside ``allowed`` is a finding too.
    """
    results = {kind: outcome(lambda twin=twin: call(twin)) for kind, twin in twins.items()}
    first_kind, first = next(iter(results.items()))
    for kind, result in results.items():
        if isinstance(result, Raised):
            if not issubclass(result.type, tuple(allowed)):
                raise Finding(f"{what}: {kind} twin raised {result!r}, outside the contract") \
                    from result.exc
        if not equal(result, first):
            raise Finding(f"{what}: twins differ: {first_kind} -> {first!r}, "
                          f"{kind} -> {result!r}")
    return first


def equal(a: Any, b: Any) -> bool:
    """Equal values of the same type (so ``b"x"`` and ``bytearray(b"x")`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):
        return len(a) == len(b) and all(equal(x, y) for x, y in zip(a, b))
    return bool(a == b)


def expect(condition: bool, message: str) -> None:
    if not condition:
        raise Finding(message)


# --- decoding fuzz bytes into arguments ---------------------------------------------------

class Draw:
    """Reads choices from the fuzzer's bytes; once they run out, every draw is the minimum.

    Small, dependency-free and deterministic, so a kept input replays identically in the
    tests with or without atheris installed.
    """

    def __init__(self, data: bytes) -> None:
        self.data = data
        self.pos = 0

    def byte(self) -> int:
        if self.pos >= len(self.data):
            return 0
        value = self.data[self.pos]
        self.pos += 1
        return value

    def int(self, low: int, high: int) -> int:
        """An int in ``[low, high]``, from as few bytes as the range needs."""
        span = high - low
        if span <= 0:
            return low
        value, width = 0, 0
        while (1 << width) <= span:
            value = (value << 8) | self.byte()
            width += 8
        return low + value % (span + 1)

    def bool(self) -> bool:
        return bool(self.byte() & 1)

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self.int(0, len(options) - 1)]

    def bytes(self, size: int) -> bytes:
        chunk = self.data[self.pos:self.pos + size]
        self.pos += len(chunk)
        return chunk

    def rest(self) -> bytes:
        chunk = self.data[self.pos:]
        self.pos = len(self.data)
        return chunk

    def splits(self, total: int, most: int = 16) -> list[int]:
        """Sorted cut points in ``[0, total]`` (repeats allowed: empty chunks are fed too)."""
        return sorted(self.int(0, total) for _ in range(self.int(0, most)))


def chunks(data: bytes, cuts: Sequence[int]) -> list[bytes]:
    """``data`` cut at ``cuts`` (sorted offsets); the pieces join back to ``data``."""
    pieces, start = [], 0
    for cut in (*cuts, len(data)):
        pieces.append(data[start:cut])
        start = cut
    return pieces


# --- running a harness ---------------------------------------------------------------------

def kept_inputs(harness: str) -> list[Path]:
    """Every seed and every input that ever found a bug, for ``harness``."""
    files: list[Path] = []
    for folder in (SEEDS_DIR / harness, CORPUS_DIR / harness):
        if folder.is_dir():
            files += sorted(p for p in folder.iterdir() if p.is_file() and p.name != ".keep")
    return files


def random_input(rng: random.Random, seeds: list[bytes]) -> bytes:
    """A random input: fresh bytes, or a seed with a few random byte edits."""
    if seeds and rng.random() < 0.5:
        data = bytearray(rng.choice(seeds))
        for _ in range(rng.randint(1, 8)):
            where = rng.randint(0, len(data))
            action = rng.random()
            if action < 0.4 and data:
                data[min(where, len(data) - 1)] = rng.randrange(256)
            elif action < 0.7:
                data[where:where] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
            else:
                del data[where:where + rng.randint(1, 8)]
        return bytes(data)
    alphabet = rng.choice([None, b'{}[]":,\\ \n\r\tusage0123456789data:ABC+/=-_'])
    size = rng.choice([rng.randint(0, 16), rng.randint(0, 256), rng.randint(0, 4096)])
    if alphabet is None:
        return rng.randbytes(size)
    return bytes(rng.choice(alphabet) for _ in range(size))


def run_random(harness: str, test_one_input: Callable[[bytes], None], seconds: float) -> int:
    """Feed random inputs for ``seconds``; print the count; keep and re-raise a finding."""
    rng = random.Random(int(os.environ.get("FUZZ_SEED", "0")) or None)
    seeds = [p.read_bytes() for p in kept_inputs(harness)]
    deadline = time.monotonic() + seconds
    runs = 0
    while time.monotonic() < deadline:
        for _ in range(50):
            data = random_input(rng, seeds)
            try:
                test_one_input(data)
            except Exception:
                path = keep_finding(harness, data)
                print(f"random: finding after {runs} runs, input kept in {path}", flush=True)
                raise
            runs += 1
    print(f"stat::number_of_executed_units: {runs}", flush=True)
    return runs


def keep_finding(harness: str, data: bytes) -> Path:
    import hashlib

    folder = CORPUS_DIR / harness
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"finding-{hashlib.sha1(data).hexdigest()}"
    path.write_bytes(data)
    return path


def fuzz_main(harness: str, test_one_input: Callable[[bytes], None]) -> None:
    """Entry point of ``python fuzz/fuzz_<harness>.py``.

    ``--random SECONDS`` runs the random smoke; anything else goes to atheris (libFuzzer
    flags and corpus directories). Without atheris, the random smoke is the only mode.
    """
    argv = sys.argv[1:]
    if argv[:1] == ["--random"]:
        run_random(harness, test_one_input, float(argv[1]) if len(argv) > 1 else 10.0)
        return
    atheris = _atheris()
    if atheris is None:
        sys.exit("atheris is not installed (pip install '.[fuzz]'); use --random SECONDS")
    _instrument_harness(atheris)
    atheris.Setup(sys.argv, test_one_input)
    atheris.Fuzz()


def _instrument_harness(atheris: Any) -> None:
    """Let the fuzzer see the harness' own branches (which kind of input it built)."""
    main = sys.modules["__main__"]
    for value in list(vars(main).values()):
        targets = vars(value).values() if isinstance(value, type) else [value]
        for target in targets:
            if callable(target) and getattr(target, "__module__", None) == "__main__" \
                    and hasattr(target, "__code__"):
                atheris.instrument_func(target)
