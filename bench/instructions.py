"""Instructions per byte of the relay's byte scans, the base64 kernels and the object check,
vector against portable, counted instead of timed: aarch64 can only be emulated here, and an
emulator's time says nothing about a real CPU, while the number of instructions a kernel
executes is the same under emulation as on the hardware (for the same binary).

Usage: python bench/instructions.py [--arch x86_64,aarch64] [--bytes 65536,1024] [-o FILE]

x86-64: bench/icount/kernels.c built with the host's cc, run under valgrind's callgrind.
aarch64: the same file cross-compiled with gcc-aarch64-linux-gnu against the arm64 root of
tools/arm64_root.sh, run by qemu-user (Debian's qemu-user, the dynamic build: it loads TCG
plugins but ships none) with bench/icount/qemu_icount.c, a plugin that counts executed
instructions. Each figure is the difference between two runs that differ only in how many
times the kernel runs, divided by the bytes of the extra runs: start-up, the dynamic loader
and the input's set-up cancel out. Both kinds must return the same results, or it stops.

Not a pyperf benchmark (bench/report.py does not run it): instructions are not time. A NEON
instruction does 16 bytes of work and a scalar one 1, and their latencies differ by CPU;
what the counts show is how much work each path asks of the CPU, not how fast it goes.
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import subprocess
import sys
import sysconfig
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT_DIR = HERE.parent
BUILD = ROOT_DIR / "build" / "icount"
RESULTS = HERE / "results"

#: (work, what it measures); the per-byte figure is per byte of the input
WORKS = [
    ("candidates", "usage-key scan (next_candidate), a whole read with no usage"),
    ("events", "blank lines one event after another (first_lflf), as the relay splits"),
    ("count", "event ends in a whole read (count_event_ends)"),
    ("last", "last blank line (last_lflf), a read with none"),
    ("encode", "base64 encode, per input byte"),
    ("decode", "base64 decode of valid text, per input character"),
    ("object", "object check of a chat chunk ending in \"usage\":null (vector kernels only)"),
]
KINDS = ("simd", "portable")
#: bytes run in the extra repeats, at least: enough that a run's noise is far below 0.001
TARGET_BYTES = 1 << 21


def run(cmd: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cmd, capture_output=True, text=True, check=True)


def need(tool: str, package: str) -> str:
    path = shutil.which(tool)
    if path is None:
        sys.exit(f"instructions: {tool} is missing (Debian: apt-get install {package})")
    return path


class Machine:
    """How to build the driver for one architecture and count its instructions."""

    name = ""
    vector = ""  # what "simd" is on this machine

    def build(self) -> Path:
        raise NotImplementedError

    def count(self, driver: Path, args: list[str]) -> tuple[int, str]:
        """Instructions executed by one run, and what it printed."""
        raise NotImplementedError


class X86(Machine):
    name = "x86_64"

    def build(self) -> Path:
        cc = need("cc", "gcc")
        need("valgrind", "valgrind")
        out = BUILD / "x86_64" / "kernels"
        out.parent.mkdir(parents=True, exist_ok=True)
        run([cc, "-O3", "-Wall", "-Wno-unused-function", f"-I{sysconfig.get_paths()['include']}",
             f"-I{ROOT_DIR / 'tokcore'}", str(HERE / "icount" / "kernels.c"), "-o", str(out)])
        return out

    def count(self, driver: Path, args: list[str]) -> tuple[int, str]:
        done = run(["valgrind", "--tool=callgrind", "--callgrind-out-file=/dev/null",
                    str(driver), *args])
        found = re.search(r"Collected : (\d+)", done.stderr)
        assert found, done.stderr
        return int(found.group(1)), done.stdout.strip()


class Aarch64(Machine):
    name = "aarch64"

    def __init__(self) -> None:
        self.root = Path(run(["bash", str(ROOT_DIR / "tools" / "arm64_root.sh")]).stdout.strip())

    def build(self) -> Path:
        cross = need("aarch64-linux-gnu-gcc", "gcc-aarch64-linux-gnu")
        need("qemu-aarch64", "qemu-user")
        includes = sorted((self.root / "usr" / "include").glob("python3.*"))
        if not includes:
            sys.exit(f"instructions: no Python headers in {self.root}")
        out = BUILD / "aarch64" / "kernels"
        out.parent.mkdir(parents=True, exist_ok=True)
        run([cross, f"--sysroot={self.root}", "-O3", "-Wall", "-Wno-unused-function",
             f"-I=/{includes[-1].relative_to(self.root).as_posix()}",
             f"-I{ROOT_DIR / 'tokcore'}", str(HERE / "icount" / "kernels.c"), "-o", str(out)])
        self.plugin = BUILD / "qemu_icount.so"
        run([need("cc", "gcc"), "-O2", "-shared", "-fPIC", str(HERE / "icount" / "qemu_icount.c"),
             "-o", str(self.plugin)])
        return out

    def count(self, driver: Path, args: list[str]) -> tuple[int, str]:
        done = run(["qemu-aarch64", "-L", str(self.root), "-plugin", str(self.plugin),
                    str(driver), *args])
        found = re.search(r"icount: (\d+)", done.stderr)
        assert found, done.stderr
        return int(found.group(1)), done.stdout.strip()


def per_byte(machine: Machine, driver: Path, work: str, kind: str,
             size: int) -> tuple[float, str] | None:
    """Instructions per byte of one kernel, and its results (None: no such kernel here)."""
    repeats = max(2, TARGET_BYTES // size)
    try:
        low, low_out = machine.count(driver, [work, kind, str(size), str(repeats)])
        high, high_out = machine.count(driver, [work, kind, str(size), str(2 * repeats)])
    except subprocess.CalledProcessError as exc:
        if exc.returncode == 3:  # no vector kernel on this build or CPU
            return None
        raise
    return (high - low) / (repeats * size), f"{low_out} {high_out}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--arch", default="x86_64,aarch64")
    parser.add_argument("--bytes", default="65536,1024")
    parser.add_argument("-o", "--output", type=Path, default=RESULTS / "instructions.json")
    args = parser.parse_args()
    machines: list[Machine] = []
    for arch in args.arch.split(","):
        machines.append({"x86_64": X86, "aarch64": Aarch64}[arch]())
    sizes = [int(s) for s in args.bytes.split(",")]
    results: dict[str, float | None] = {}
    for machine in machines:
        driver = machine.build()
        for size in sizes:
            for work, _ in WORKS:
                outs = {}
                for kind in KINDS:
                    got = per_byte(machine, driver, work, kind, size)
                    key = f"{machine.name} {kind} {work} {size}"
                    results[key] = None if got is None else got[0]
                    if got is not None:
                        outs[kind] = got[1]
                if len(set(outs.values())) > 1:
                    sys.exit(f"instructions: {machine.name} {work}: the kinds disagree: {outs}")
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(results, indent=1) + "\n")
    print(table(results, [m.name for m in machines], sizes))


def table(results: dict[str, float | None], arches: list[str], sizes: list[int]) -> str:
    names = {"x86_64": ("x86-64 SSE2/AVX2", "x86-64 portable"),
             "aarch64": ("aarch64 NEON", "aarch64 portable")}
    head = ["kernel", "bytes"] + [n for arch in arches for n in names[arch]]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for work, what in WORKS:
        for size in sizes:
            cells = [what, str(size)]
            for arch in arches:
                for kind in KINDS:
                    value = results.get(f"{arch} {kind} {work} {size}")
                    cells.append("-" if value is None else f"{value:.2f}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


if __name__ == "__main__":
    main()
