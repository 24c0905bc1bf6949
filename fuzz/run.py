"""Run every fuzz harness for a bounded total time; print executions and findings per harness.

    python fuzz/run.py [--seconds TOTAL] [--per-harness SECONDS] [--jobs N] [--random]
                       [--native {off,auto,on}] [harness ...]

Each harness runs under atheris/libFuzzer with its seeds (fuzz/seeds/<name>), the inputs that
ever found a bug (fuzz/corpus/<name>), a scratch corpus (fuzz/work/<name>, not kept) and,
where there is one, a dictionary of tokens (fuzz/dicts/<name>.dict).
An input that finds a bug is copied into fuzz/corpus/<name>/ so that the tests replay it
until it is fixed, and the run fails. An input that fails like an open finding
(fuzz/corpus/open.txt) is counted as a hit of it, not a new finding, and fuzzing goes on.
``--random`` (chosen anyway when atheris is missing) feeds plain random inputs instead: a
smoke test, not coverage-guided fuzzing.

The time is split by need: the harnesses are packed into ``--jobs`` slots (the longest
first into the least loaded) and each gets a share of its slot in proportion to its weight
in SETTINGS, which is about the inverse of its rate, so that every harness reaches the same
number of executions (a million in the 10 minutes of ``make fuzz`` on a 2-core machine).

``--native on`` builds a copy of the Cython twins with clang's -fsanitize=fuzzer-no-link in
build/fuzz-native (rebuilt when a source changes) and runs the harnesses on it with
atheris' libFuzzer loaded globally, so that libFuzzer sees the C edges and comparisons too;
``auto`` does so where clang and atheris can, and says why not otherwise. ``make fuzz``
installs clang where it is missing and runs with ``--native on``.

Each harness's line gives the coverage libFuzzer reached: ``cov``, the edges (Python's,
and with ``--native`` the Cython twins' C code's, whose counters the line names), and
``ft``, its features.

The last line reads "fuzz: N passed, M failed[, K skipped]" (harnesses; skipped: the hot
path it fuzzes is not in this tree).
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path

FUZZ_DIR = Path(__file__).resolve().parent
ROOT = FUZZ_DIR.parent
WORK_DIR = FUZZ_DIR / "work"
CRASH_DIR = FUZZ_DIR / "crashes"
CORPUS_DIR = FUZZ_DIR / "corpus"
SEEDS_DIR = FUZZ_DIR / "seeds"
DICTS_DIR = FUZZ_DIR / "dicts"
NATIVE_DIR = ROOT / "build" / "fuzz-native"
ARTIFACT_PREFIXES = ("crash-", "timeout-", "oom-", "leak-", "slow-unit-")
# name: (weight: the share of the time, libFuzzer -max_len). The weights are the CPU
# seconds each harness needs for a million executions on the 2-core machine with the C
# coverage on (make fuzz), over 10: relay ~2,000 executions a second (the Python relay on
# every input, its framing and usage rules traced), events ~7,000, ids ~9,300, usage ~9,600,
# fused ~11,000, b64 ~40,000. So the relay has a slot to itself and the other five share
# the second one. Inputs: a stream of a few events, a JSON body, at most 40 ids.
SETTINGS = {
    "relay": (50, 1024),
    "events": (15, 1024),
    "usage": (11, 2048),
    "ids": (11, 1024),
    "fused": (9, 1024),
    "b64": (3, 1024),
    # wire: ~1,500 a second (its Python twin's byte readers, traced, on every damaged
    # input); a full weight (67) would halve the relay's share: ~0.35 million in make fuzz
    "wire": (25, 1024),
    # writer: ~5,000 a second in the random smoke (both twins, the Python one traced)
    "writer": (12, 1024),
}
DEFAULT_SETTINGS = (10, 2048)
STARTUP_SECONDS = 3  # python, numpy, the corpus: counted in each harness' slot
EXECUTED = re.compile(r"stat::number_of_executed_units:\s*(\d+)")
PROGRESS = re.compile(r"^#(\d+)\s", re.MULTILINE)
MODULES = re.compile(r"INFO: Loaded (\d+) modules\s+\((\d+) inline 8-bit counters\)")
# libFuzzer's progress and final lines: the edges (cov) and features (ft) reached so far
COVERAGE = re.compile(r"\bcov: (\d+) ft: (\d+)")


@dataclass
class Result:
    name: str
    seconds: float
    executions: int
    findings: list[Path]
    open_hits: int
    returncode: int
    log: Path
    counters: str
    coverage: tuple[int, int] | None = None  # libFuzzer's last (cov, ft)

    @property
    def ok(self) -> bool:
        return self.returncode == 0 and not self.findings


def harnesses() -> list[str]:
    return sorted(p.stem.removeprefix("fuzz_") for p in FUZZ_DIR.glob("fuzz_*.py"))


def missing_hot_paths(name: str) -> list[str]:
    """The hot paths a harness needs whose reference twin is not in this tree (yet)."""
    import _parity

    return _parity.missing_hot_paths(FUZZ_DIR / f"fuzz_{name}.py")


def have_atheris() -> bool:
    try:
        import atheris  # noqa: F401
    except ImportError:
        return False
    return True


def run_one(name: str, seconds: int, random_mode: bool, env: dict[str, str]) -> Result:
    work, crashes = WORK_DIR / name, CRASH_DIR / name
    for folder in (work, crashes, CORPUS_DIR / name, SEEDS_DIR / name):
        folder.mkdir(parents=True, exist_ok=True)
    kept_before = kept_findings(name)
    script = str(FUZZ_DIR / f"fuzz_{name}.py")
    if random_mode:
        command = [sys.executable, script, "--random", str(seconds)]
    else:
        command = [sys.executable, script, f"-max_total_time={seconds}", "-print_final_stats=1",
                   "-timeout=30", "-rss_limit_mb=3072",
                   f"-max_len={SETTINGS.get(name, DEFAULT_SETTINGS)[1]}",
                   f"-artifact_prefix={crashes}/"]
        if (DICTS_DIR / f"{name}.dict").exists():  # tokens the mutator splices in
            command.append(f"-dict={DICTS_DIR / name}.dict")
        command += [str(work), str(SEEDS_DIR / name), str(CORPUS_DIR / name)]
    log = WORK_DIR / f"{name}.log"
    open_dir = crashes / "open"
    started = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(command, stdout=out, stderr=subprocess.STDOUT, cwd=FUZZ_DIR,
                              timeout=seconds + 300,
                              env={**os.environ, **env, "FUZZ_OPEN_HITS": str(open_dir)})
    elapsed = time.monotonic() - started
    text = log.read_text(errors="replace")
    executed = EXECUTED.findall(text)
    progress = PROGRESS.findall(text)
    executions = int(executed[-1]) if executed else int(progress[-1]) if progress else 0
    findings = [keep(name, p) for p in sorted(crashes.iterdir())
                if p.name.startswith(ARTIFACT_PREFIXES)]
    findings += sorted(kept_findings(name) - kept_before - set(findings))
    hits = open_dir / "hits"
    modules = MODULES.findall(text)
    counters = f"{modules[0][0]} modules, {int(modules[0][1]):,} C counters" if modules else ""
    reached = COVERAGE.findall(text)
    return Result(name, elapsed, executions, findings,
                  int(hits.read_text()) if hits.exists() else 0, done.returncode, log,
                  counters, (int(reached[-1][0]), int(reached[-1][1])) if reached else None)


def kept_findings(name: str) -> set[Path]:
    """The kept inputs of a harness (what --random mode and keep() write)."""
    return set((CORPUS_DIR / name).glob("finding-*"))


def keep(name: str, artifact: Path) -> Path:
    """Move a libFuzzer artifact into the kept corpus (named by content, like libFuzzer)."""
    data = artifact.read_bytes()
    kept = CORPUS_DIR / name / f"finding-{hashlib.sha1(data).hexdigest()}"
    kept.write_bytes(data)
    artifact.unlink()
    return kept


def schedule(names: list[str], seconds: int, jobs: int) -> tuple[dict[str, int], list[list[str]]]:
    """Seconds for each harness and the slots that run them one after another: the
    harnesses packed by weight (the largest first into the least loaded slot), each slot's
    time shared in proportion to the weights, so no slot runs past ``seconds``."""
    weight = {n: SETTINGS.get(n, DEFAULT_SETTINGS)[0] for n in names}
    slots: list[list[str]] = [[] for _ in range(max(1, min(jobs, len(names))))]
    for name in sorted(names, key=lambda n: -weight[n]):
        min(slots, key=lambda slot: sum(weight[n] for n in slot)).append(name)
    unit = min((seconds - STARTUP_SECONDS * len(slot)) / sum(weight[n] for n in slot)
               for slot in slots)
    return {n: max(1, int(unit * weight[n])) for n in names}, slots


# --- the coverage-instrumented build of the Cython twins ------------------------------------

NATIVE_FLAGS = "-fsanitize=fuzzer-no-link"


def native_build() -> tuple[Path | None, str]:
    """``(tree, "")`` with the Cython twins built by clang with -fsanitize=fuzzer-no-link
    in build/fuzz-native (a copy of the sources, rebuilt when they change), or
    ``(None, why not)``."""
    if not have_atheris():
        return None, "atheris is not installed"
    clang = shutil.which("clang")
    if clang is None:
        return None, "no clang on PATH (Debian: apt-get install clang)"
    # what setup.py reads: the package (its root and its wings), the build backend it loads,
    # its own configuration and the README that pyproject.toml names
    sources = sorted(p for p in (ROOT / "tokcore").rglob("*")
                     if p.suffix in (".py", ".pyx", ".pxd", ".pyi", ".h", ".typed"))
    sources += sorted((ROOT / "build_backend").glob("*.py"))
    sources += [ROOT / "setup.py", ROOT / "pyproject.toml", ROOT / "README.md"]
    digest = hashlib.sha1(NATIVE_FLAGS.encode())
    for path in sources:
        digest.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes())
    stamp = NATIVE_DIR / ".sources"
    if not (stamp.exists() and stamp.read_text() == digest.hexdigest()):
        shutil.rmtree(NATIVE_DIR, ignore_errors=True)
        for path in sources:
            target = NATIVE_DIR / path.relative_to(ROOT)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, target)
        env = {**os.environ, "CC": clang, "LDSHARED": f"{clang} -shared",
               "CFLAGS": NATIVE_FLAGS, "LDFLAGS": NATIVE_FLAGS,
               "TOKCORE_REQUIRE_EXTENSIONS": "1"}
        env.pop("TOKCORE_NO_EXTENSIONS", None)
        print(f"fuzz: building the Cython twins with clang {NATIVE_FLAGS} in "
              f"{NATIVE_DIR.relative_to(ROOT)}", flush=True)
        built = subprocess.run([sys.executable, "setup.py", "-q", "build_ext", "--inplace",
                                "-j", "2"], cwd=NATIVE_DIR, env=env, capture_output=True,
                               text=True)
        if built.returncode:
            return None, f"the clang build failed: {built.stderr.strip()[-800:]}"
        stamp.write_text(digest.hexdigest())
    probe = subprocess.run(
        [sys.executable, "-c", "import _parity; _parity.load_libfuzzer_globally(); "
         "import tokcore; print(tokcore.BACKEND)"],
        cwd=FUZZ_DIR, env={**os.environ, "FUZZ_TOKCORE_ROOT": str(NATIVE_DIR)},
        capture_output=True, text=True)
    if probe.returncode or probe.stdout.strip() != "cython":
        return None, f"the instrumented build does not load: {probe.stderr.strip()[-800:]}"
    return NATIVE_DIR, ""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("names", nargs="*", help="harnesses to run (default: all)")
    parser.add_argument("--seconds", type=int,
                        default=int(os.environ.get("FUZZ_SECONDS", "600")),
                        help="total wall time for all harnesses (default: $FUZZ_SECONDS or 600)")
    parser.add_argument("--per-harness", type=int, default=None,
                        help="seconds for each harness instead of a share of --seconds")
    parser.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1))
    parser.add_argument("--random", action="store_true",
                        help="random inputs from Python's random module instead of atheris")
    parser.add_argument("--native", choices=["off", "auto", "on"], default="off",
                        help="libFuzzer coverage of the Cython twins' C code too (a clang "
                             "build in build/fuzz-native); auto: where it can be had")
    args = parser.parse_args()

    names = args.names or harnesses()
    unknown = set(names) - set(harnesses())
    if unknown:
        parser.error(f"no such harness: {', '.join(sorted(unknown))}")
    random_mode = args.random
    if not random_mode and not have_atheris():
        print("fuzz: atheris is not installed: falling back on random inputs (a smoke test, "
              "not coverage-guided fuzzing)", flush=True)
        random_mode = True
    env: dict[str, str] = {}
    if args.native != "off" and not random_mode:
        tree, why = native_build()
        if tree is None:
            print(f"fuzz: no native coverage: {why}", flush=True)
            if args.native == "on":
                print("fuzz: 0 passed, 1 failed (--native on)")
                return 1
        else:
            env = {"FUZZ_NATIVE": "1", "FUZZ_TOKCORE_ROOT": str(tree)}
    absent = {n: missing_hot_paths(n) for n in names}
    for name, missing in absent.items():
        if missing:
            print(f"fuzz: {name} not run: {', '.join(missing)} not in this tree", flush=True)
    names = [n for n in names if not absent[n]]
    skipped = sum(bool(m) for m in absent.values())
    if not names:
        print(f"fuzz: 0 passed, 1 failed, {skipped} skipped (no harness could run)")
        return 1
    seconds, slots = schedule(names, args.seconds, args.jobs)
    if args.per_harness:
        seconds = dict.fromkeys(names, args.per_harness)
    mode = "random inputs" if random_mode else "atheris/libFuzzer" + (
        ", C coverage of the Cython twins" if env else "")
    print(f"fuzz: {len(names)} harnesses, {len(slots)} at a time, {mode}; seconds each: "
          + ", ".join(f"{n} {seconds[n]}" for n in names), flush=True)
    shutil.rmtree(CRASH_DIR, ignore_errors=True)

    done: dict[str, Result] = {}

    def run_slot(slot: list[str]) -> None:
        for name in slot:
            done[name] = run_one(name, seconds[name], random_mode, env)

    threads = [threading.Thread(target=run_slot, args=(slot,)) for slot in slots]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    results = [done[n] for n in names]

    # cov: the edges libFuzzer's coverage reached (the Python code's, atheris', and with
    # --native the C code's of the Cython twins, out of the C counters shown); ft: features
    print(f"{'harness':<10} {'seconds':>8} {'executions':>12} {'exec/s':>8} {'findings':>9} "
          f"{'cov':>7} {'ft':>7}")
    for r in results:
        rate = r.executions / r.seconds if r.seconds else 0
        cov, ft = (f"{r.coverage[0]:>7,}", f"{r.coverage[1]:>7,}") if r.coverage else ("-", "-")
        print(f"{r.name:<10} {r.seconds:>8.0f} {r.executions:>12,} {rate:>8,.0f} "
              f"{len(r.findings):>9} {cov:>7} {ft:>7}"
              + (f"   {r.counters}" if r.counters else "")
              + ("" if r.ok else f"   FAILED (log: {r.log})"))
        for path in r.findings:
            print(f"    kept {path.relative_to(FUZZ_DIR.parent)}")
        if r.open_hits:
            print(f"    {r.open_hits:,} inputs hit an open finding (fuzz/corpus/open.txt); "
                  f"some are in {(CRASH_DIR / r.name / 'open').relative_to(ROOT)}")
        if r.returncode and not r.findings:
            print(f"    exit status {r.returncode} without an artifact; see {r.log}")
    failed = sum(not r.ok for r in results)
    print(f"fuzz: {len(results) - failed} passed, {failed} failed"
          + (f", {skipped} skipped" if skipped else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
