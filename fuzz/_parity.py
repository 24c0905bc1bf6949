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
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import FunctionType, ModuleType
from typing import Any, NamedTuple, NoReturn

FUZZ_DIR = Path(__file__).resolve().parent
#: the tree whose tokcore the harnesses import: this one, or another build of the same
#: sources (run.py --native points it at the coverage-instrumented copy in build/)
ROOT = Path(os.environ.get("FUZZ_TOKCORE_ROOT") or FUZZ_DIR.parent).resolve()
if sys.path[:1] != [str(ROOT)]:  # the harnesses import the in-place build of that tree
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
    """``{"c": tokcore.<name>_c, "py": tokcore.<name>_py}``, minus ``c`` without extensions;
    ``name`` is a hot path's dispatcher under the package (``"ids._pack"``, ``"stream._relay"``).

    Outside TOKCORE_NO_EXTENSIONS a missing Cython twin is an error, never a quiet skip.
    """
    from tokcore._backend import NO_EXTENSIONS

    twins = {"py": importlib.import_module(f"tokcore.{name}_py")}
    if not NO_EXTENSIONS:
        twins = {"c": importlib.import_module(f"tokcore.{name}_c"), **twins}
    return twins


def missing_hot_paths(harness_file: Path) -> list[str]:
    """``tokcore/<x>_py.py`` files that a harness loads twins from and that do not exist.

    A hot path that has not landed in this tree yet cannot be fuzzed (that is reported, not
    hidden); one whose Python twin exists but whose Cython twin fails to import is an error.
    """
    import re

    names = re.findall(r'load_twins\("([\w.]+)"\)', harness_file.read_text())
    paths = [f"tokcore/{n.replace('.', '/')}_py.py" for n in names]
    return [path for path in paths if not (ROOT / path).exists()]


#: run.py --native: the Cython twins were built with clang's -fsanitize=fuzzer-no-link, so
#: their C edges and comparisons feed libFuzzer; atheris' own libFuzzer must then be loaded
#: into the global symbol namespace before they are imported (they call into it)
NATIVE = os.environ.get("FUZZ_NATIVE", "") not in ("", "0")


@contextlib.contextmanager
def instrumented(active: bool, own: Sequence[str] = (),
                 native_skip: Sequence[str] = ()) -> Iterator[None]:
    """Import tokcore in the ``with`` block; when running as a fuzzer, instrument its Python
    code for atheris afterwards (:func:`instrument_tokcore`). With the C coverage of the
    Cython twins (NATIVE), the modules in ``native_skip`` are left alone: Python twins whose
    Cython twin's edges and comparisons now guide the fuzzer, and whose Python tracing
    would cost most of the harness' time (they still run and are checked on every input)."""
    atheris = _atheris() if active else None
    if atheris is not None and NATIVE:
        load_libfuzzer_globally()
    yield
    if atheris is not None:
        instrument_tokcore(atheris, own, native_skip if NATIVE else ())


def instrument_tokcore(atheris: Any, own: Sequence[str], skip: Sequence[str] = ()) -> int:
    """Patch every function of the loaded ``tokcore`` modules for coverage.

    The modules of the code a harness is about (``own``: ``"stream._relay_py"`` for
    ``tokcore.stream._relay_py``) trace branches and comparisons (atheris' dataflow tracing: the
    operands of ``==`` and ``in`` guide the mutator); every other module traces its
    branches only: helpers fuzzed with comparisons by their own harness (the JSON scan for
    the relay) still show their paths, for less. The modules in ``skip`` are not patched.
    Returns how many functions were patched."""
    patched = 0
    dataflow = {f"tokcore.{name}" for name in own}
    skipped = {f"tokcore.{name}" for name in skip}
    for name, module in sorted(sys.modules.items()):
        if name != "tokcore" and not name.startswith("tokcore.") or name in skipped:
            continue
        trace = name in dataflow
        for value in list(vars(module).values()):
            functions = [value]
            if isinstance(value, type) and value.__module__ == name:
                functions = [attr.fget if isinstance(attr, property)
                             else getattr(attr, "__func__", attr)  # static/class methods
                             for attr in vars(value).values()]
            for function in functions:
                if isinstance(function, FunctionType) and function.__module__ == name:
                    function.__code__ = atheris.patch_code(function.__code__, trace)
                    patched += 1
    return patched


def load_libfuzzer_globally() -> None:
    """Import atheris' core that has libFuzzer linked in with RTLD_GLOBAL, so that the
    ``__sanitizer_cov_*`` hooks an instrumented extension calls resolve to that libFuzzer
    (atheris otherwise loads it privately, at ``Fuzz()``, and the import of such an
    extension fails on ``undefined symbol: __sancov_lowest_stack``)."""
    flags = sys.getdlopenflags()
    sys.setdlopenflags(flags | os.RTLD_GLOBAL)
    try:
        importlib.import_module("atheris.core_with_libfuzzer")
    finally:
        sys.setdlopenflags(flags)


def _atheris() -> Any:
    try:
        import atheris
    except ImportError:
        return None
    return atheris


# --- outcomes ------------------------------------------------------------------------------

class Raised:
    """An exception as an outcome: compared by exact type (messages may differ in wording)."""

    def __init__(self, exc: BaseException) -> None:
        self.type = type(exc)
        self.exc = exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Raised) and other.type is self.type

    def __repr__(self) -> str:
        return f"Raised({self.type.__name__}: {self.exc})"


class Allow(NamedTuple):
    """An exception the contract allows for one drawn input: this exact type (a subclass is
    not it), whose text contains ``message`` (``match="=="``: is it; ``"re"``: has a match
    of it as a regular expression)."""

    type: type[BaseException]
    message: str = ""
    match: str = "in"

    def matches(self, exc: BaseException) -> bool:
        if type(exc) is not self.type:
            return False
        if self.match == "in":
            return self.message in str(exc)
        if self.match == "==":
            return str(exc) == self.message
        return re.search(self.message, str(exc)) is not None


#: what a harness says is allowed: Allow entries, or bare exception types (any message)
Allowed = Sequence[Allow | type[BaseException]]


def allows(allowed: Allowed, exc: BaseException) -> bool:
    return any((rule if isinstance(rule, Allow) else Allow(rule)).matches(exc)
               for rule in allowed)


def outcome(call: Callable[[], Any]) -> Any:
    """The result of ``call()``, or a :class:`Raised` for the exception it raised."""
    try:
        return call()
    except Exception as exc:  # every exception is data here; the checks judge it
        return Raised(exc)


def outcomes(twins: dict[str, Any], call: Callable[[Any], Any]) -> dict[str, Any]:
    """``{kind: outcome of call(twin)}`` (one call a twin)."""
    return {kind: outcome(lambda twin=twin: call(twin)) for kind, twin in twins.items()}


def agree(results: dict[str, Any], allowed: Allowed, what: str,
          must_raise: bool = False) -> Any:
    """The common outcome of ``results``: every twin must agree in value and type, or in
    exception type; an exception must be one that ``allowed`` names for this input (none
    when it is empty), and with ``must_raise`` a result that is not one is a finding too."""
    first_kind, first = next(iter(results.items()))
    for kind, result in results.items():
        if isinstance(result, Raised):
            if not allows(allowed, result.exc):
                raise Finding(f"{what}: {kind} twin raised {result!r}, outside the contract "
                              f"for this input (allowed: {describe(allowed)})") from result.exc
        elif must_raise:
            raise Finding(f"{what}: {kind} twin returned {result!r}; the contract says "
                          f"{describe(allowed)}")
        if not equal(result, first):
            raise Finding(f"{what}: twins differ: {first_kind} -> {first!r}, "
                          f"{kind} -> {result!r}")
    return first


def describe(allowed: Allowed) -> str:
    if not allowed:
        return "no exception"
    return " or ".join(rule.type.__name__ + (f" /{rule.message}/" if rule.message else "")
                       if isinstance(rule, Allow) else rule.__name__ for rule in allowed)


def same_outcome(twins: dict[str, Any], call: Callable[[Any], Any], allowed: Allowed,
                 what: str, must_raise: bool = False) -> Any:
    """Run ``call(twin)`` on every twin and :func:`agree` on the outcomes."""
    return agree(outcomes(twins, call), allowed, what, must_raise)


def equal(a: Any, b: Any) -> bool:
    """Equal values of the same type (so ``b"x"`` and ``bytearray(b"x")`` differ)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, (list, tuple)):  # equal items (C loops), then their types, then nested
        if len(a) != len(b) or a != b or list(map(type, a)) != list(map(type, b)):
            return False
        return all(equal(x, y) for x, y in zip(a, b) if isinstance(x, (list, tuple)))
    return bool(a == b)


def expect(condition: bool, message: str) -> None:
    """Fail with ``message`` unless ``condition`` (build costly messages only in ``fail``)."""
    if not condition:
        raise Finding(message)


def fail(message: str) -> NoReturn:
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
        """An int in ``[low, high]``, from as few bytes as the range needs (big-endian;
        bytes past the end read as zeros)."""
        span = high - low
        if span <= 0:
            return low
        data, pos = self.data, self.pos
        if span < 256:  # one byte, the common case
            if pos >= len(data):
                return low
            self.pos = pos + 1
            return low + data[pos] % (span + 1)
        size = (span.bit_length() + 7) >> 3
        chunk = data[pos:pos + size]
        self.pos = pos + len(chunk)
        return low + (int.from_bytes(chunk, "big") << 8 * (size - len(chunk))) % (span + 1)

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


def cuts(total: int, count: int, seed: int) -> list[int]:
    """``count`` sorted cut points in ``[0, total]`` spread by ``seed`` (an LCG: cheaper
    than seeding ``random`` per input; repeats give empty chunks, fed too)."""
    state, points = seed * 2654435761 + 1, []
    for _ in range(count):
        state = (state * 6364136223846793005 + 1442695040888963407) & 0xFFFFFFFFFFFFFFFF
        points.append((state >> 33) % (total + 1))
    return sorted(points)


def feed_all(stream: Any, pieces: Sequence[Any], what: str, pending: bool = False) -> list[Any]:
    """``stream.feed(piece)`` for each piece, then ``stream.close()``: every return value
    (each followed by ``stream.pending_bytes`` with ``pending``). These calls never raise on
    bytes-like data: any exception is a finding."""
    results: list[Any] = []
    try:
        for piece in pieces:
            results.append(stream.feed(piece))
            if pending:
                results.append(stream.pending_bytes)
        results.append(stream.close())
        if pending:
            results.append(stream.pending_bytes)
    except Exception as exc:
        raise Finding(f"{what}: feed/close raised {exc!r}; they never raise on data") from exc
    return results


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


#: the findings kept whose bug is not fixed yet (see the file)
OPEN_FILE = CORPUS_DIR / "open.txt"
#: how many inputs that hit an open finding a run keeps (the rest are only counted)
OPEN_INPUTS_KEPT = 20


def open_findings(harness: str) -> dict[str, str]:
    """``{kept file name: the start of its Finding message}`` for ``harness``'s open
    findings (``fuzz/corpus/open.txt``)."""
    found: dict[str, str] = {}
    if OPEN_FILE.exists():
        for line in OPEN_FILE.read_text().splitlines():
            if line.strip() and not line.startswith("#"):
                name, kept, prefix = line.split(maxsplit=2)
                if name == harness:
                    found[kept] = prefix.strip()
    return found


def tolerating_open(harness: str, test_one_input: Callable[[bytes], None]) -> \
        Callable[[bytes], None]:
    """``test_one_input`` that, while fuzzing, takes a Finding whose message starts like an
    open finding's for another hit of that known bug: the input goes to
    ``$FUZZ_OPEN_HITS/open-<sha1>`` (the first few; ``hits`` counts them all, and run.py
    reports them) instead of
    stopping the run, so the rest of the contract keeps being fuzzed until it is fixed.
    Every other failure stops the run as always."""
    prefixes = tuple(set(open_findings(harness).values()))
    if not prefixes:
        return test_one_input
    import hashlib

    folder = Path(os.environ.get("FUZZ_OPEN_HITS") or FUZZ_DIR / "crashes" / harness / "open")
    hits = [0]

    def test(data: bytes) -> None:
        try:
            test_one_input(data)
        except Finding as exc:
            if not str(exc).startswith(prefixes):
                raise
            hits[0] += 1
            folder.mkdir(parents=True, exist_ok=True)
            if hits[0] <= OPEN_INPUTS_KEPT:
                (folder / f"open-{hashlib.sha1(data).hexdigest()}").write_bytes(data)
            (folder / "hits").write_text(f"{hits[0]}\n")

    return test


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
    test_one_input = tolerating_open(harness, test_one_input)
    if argv[:1] == ["--random"]:
        run_random(harness, test_one_input, float(argv[1]) if len(argv) > 1 else 10.0)
        return
    atheris = _atheris()
    if atheris is None:
        sys.exit("atheris is not installed (pip install '.[fuzz]'); use --random SECONDS")
    _instrument_harness(atheris)
    # native: the libFuzzer loaded globally above, not a second one found by atheris' probe
    options = {"internal_libfuzzer": True} if NATIVE else {}
    atheris.Setup(sys.argv, test_one_input, **options)
    atheris.Fuzz()


def _instrument_harness(atheris: Any) -> None:
    """Let the fuzzer see the harness' own branches where it decides what input to build:
    ``test_one_input`` and the ``draw_*``/``build_*`` functions. The ``check_*`` functions
    (the oracles' comparisons, loops over every byte and event) are left alone: their
    branches mirror the twins', which are instrumented, and tracing every comparison of
    whole outputs there would cost a third of the executions."""
    main = sys.modules["__main__"]
    for name, value in list(vars(main).items()):
        if name == "test_one_input" or name.startswith(("draw_", "build_")):
            if getattr(value, "__module__", None) == "__main__" and hasattr(value, "__code__"):
                atheris.instrument_func(value)
