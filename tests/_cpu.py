"""What this machine's CPU has, for the tests that check a build picked its vector loops."""

from __future__ import annotations


def cpu_has(flag: str) -> bool | None:
    """Whether /proc/cpuinfo lists ``flag``; None where there is no such file."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as file:
            cpuinfo = file.read()
    except OSError:
        return None
    return any(flag in line.split() for line in cpuinfo.splitlines() if line.startswith("flags"))
