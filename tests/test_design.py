"""DESIGN.md's claims that the code can show, held to the code: the hot paths and which have a
dispatcher or no twin, the C and Python calls between the compiled twins, the constructors'
binding, the twins with kernels and the kernel vocabulary, the C constants copied into
several twins (and their one value), the bounds it states as numbers, the count of entries
in tokcore/, each wing's docstring, the files and `make` targets it names, the dependency
groups, each test file's docstring, and no CI time figure (that budget is `.ci/run`'s).

Each test reads a sentence of DESIGN.md with a pattern and fails naming what differs: a
sentence reworded so that the pattern no longer finds it fails too, so the claim and its
check change together. (The wings' import table is tests/test_layout.py's.)
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from _twins import ROOT

DESIGN = (ROOT / "DESIGN.md").read_text(encoding="utf-8")
PACKAGE = ROOT / "tokcore"
WINGS = sorted(p.name for p in PACKAGE.iterdir() if (p / "__init__.py").is_file())


def sentence(pattern: str) -> re.Match[str]:
    """The one match of ``pattern`` in DESIGN.md (its prose re-wrapped to single spaces)."""
    found = list(re.finditer(pattern, re.sub(r"\s+", " ", DESIGN)))
    assert len(found) == 1, f"DESIGN.md: {len(found)} matches of {pattern!r}, not 1"
    return found[0]


def ticked(text: str) -> list[str]:
    return re.findall(r"`([^`]+)`", text)


def code(path: Path) -> str:
    """A Cython or Python file with its comments and docstrings left out."""
    text = path.read_text(encoding="utf-8")
    return re.sub(r'"""[\s\S]*?"""|#[^\n]*', "", text)


def compiled() -> dict[str, Path]:
    """Each Cython twin by its module name (``_relay_c``)."""
    return {p.stem: p for p in PACKAGE.rglob("_*_c.pyx")}


# --- twins and dispatch ----------------------------------------------------------------------

def test_the_hot_paths_and_their_modules() -> None:
    stated = set(ticked(sentence(r"The hot paths are ([^.]*)\.").group(1)))
    twins = {f"{p.parent.name}/{p.stem[:-2]}" for p in compiled().values()}
    assert stated == twins, "DESIGN.md's hot paths and the _c.pyx files differ"
    no_dispatcher = set(ticked(sentence(r"((?:`\w+`(?:, | and )?)+) has no dispatcher").group(1)))
    for path in sorted(stated):
        base = PACKAGE / path
        assert base.with_name(base.name + "_py.py").is_file(), f"{path}: no Python twin"
        assert base.with_name(base.name + "_c.pyi").is_file(), f"{path}: no stub"
        has = base.with_name(base.name + ".py").is_file()
        assert has == (base.name not in no_dispatcher), (
            f"{path}: {'a' if has else 'no'} dispatcher, DESIGN.md says otherwise")
    lone = ticked(sentence(r"((?:`[\w/]+`(?:, | and )?)+) have no twin").group(1))
    for path in lone:
        base = PACKAGE / path
        assert base.with_name(base.name + ".py").is_file(), f"{path}: no such module"
        assert not base.with_name(base.name + "_c.pyx").exists(), f"{path} has a twin"


def cimports(path: Path) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\s*from tokcore\.\w+\.(\w+_c) cimport",
                                            code(path), re.M)}


def py_imports(path: Path) -> set[str]:
    return {m.group(1) for m in re.finditer(r"^\s*from tokcore\.\w+\.(\w+_c) import",
                                            code(path), re.M)}


def test_the_calls_between_cython_twins() -> None:
    """The `.pxd` (C) calls and the Python calls from one compiled twin to another."""
    text = sentence(r"Calls between Cython twins\.\*\*(.*?)- \*\*Static types").group(1)
    stated_c = set(re.findall(r"`(\w+_c)` -> `(\w+_c)`", text))
    stated_py = set(re.findall(r"`(\w+_c)` => `(\w+_c)`", text))
    found_c: set[tuple[str, str]] = set()
    found_py: set[tuple[str, str]] = set()
    for name, path in compiled().items():
        pxd = path.with_suffix(".pxd")
        found_c |= {(name, other) for other in
                    cimports(path) | (cimports(pxd) if pxd.exists() else set())}
        found_py |= {(name, other) for other in py_imports(path)}
    assert stated_c == found_c, "DESIGN.md's cimports between the twins differ from the code's"
    assert stated_py == found_py, "DESIGN.md's Python calls between the twins differ"


def test_the_constructors_binding() -> None:
    stated = ticked(sentence(r"(`\w+` and `\w+`) bind through the Python twin's `__init__` on "
                             r"an `_args\.Bound`").group(1))
    binding = {cls for path in compiled().values() if "Bound()" in code(path)
               for cls in re.findall(r"^cdef class (\w+)", code(path), re.M)
               if not cls.startswith("_")}
    assert binding == set(stated)
    writer = sentence(r"`(\w+)` binds through `_writer_py\._bind`").group(1)
    assert "_py._bind" in code(PACKAGE / "writer" / "_writer_c.pyx") and writer == "StreamWriter"


def module_constants(path: Path) -> dict[str, object]:
    """The C enum constants of a .pyx (``NAME = expression`` in a ``cdef enum`` block)."""
    found: dict[str, object] = {}
    in_enum = False
    for line in code(path).splitlines():
        if re.match(r"cdef enum\b.*:\s*$", line):
            in_enum = True
            continue
        if in_enum and line.strip() and not line.startswith((" ", "\t")):
            in_enum = False
        m = re.match(r"\s+([A-Z][A-Z0-9_]+)\s*=\s*([0-9x*<+ ()-]+)$", line) if in_enum else None
        if m:
            found[m.group(1)] = eval(m.group(2), {})  # (digits and operators only)
    return found


def python_constants(path: Path) -> dict[str, str]:
    """A Python module's module-level ``NAME = ...`` assignments, as source text."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return {target.id: ast.unparse(node.value) for node in tree.body
            if isinstance(node, ast.Assign) for target in node.targets
            if isinstance(target, ast.Name) and re.fullmatch(r"[A-Z][A-Z0-9_]+", target.id)}


def test_the_c_constants_copied_into_several_twins_have_one_value() -> None:
    stated = set(ticked(sentence(r"is written in each compiled twin that uses it: (.*?); "
                                 r"`tests/test_design\.py`").group(1)))
    stated = {name for name in stated if re.fullmatch(r"[A-Z][A-Z0-9_]+", name)}
    values: dict[str, dict[str, object]] = {}
    for path in compiled().values():
        for name, value in module_constants(path).items():
            values.setdefault(name, {})[path.name] = value
    for path in PACKAGE.rglob("_*_py.py"):
        module = ".".join(path.relative_to(ROOT).with_suffix("").parts)
        for name in python_constants(path).keys() & values.keys():
            values[name][path.name] = getattr(__import__(module, fromlist=[name]), name)
    copied = {name for name, where in values.items()
              if len(where) > 1 and len(set(where.values())) == 1}
    assert copied <= stated, (f"C constants copied into several twins that DESIGN.md does not "
                              f"name: {sorted(copied - stated)} (or define them once)")
    for name in stated:
        assert len(set(values.get(name, {}).values())) == 1, (name, values.get(name))


def test_no_twin_copies_a_python_constant_of_its_python_twin() -> None:
    """One definition: a Cython twin imports what its Python twin defines, at Python level."""
    copies = []
    for path in compiled().values():
        twin = path.with_name(path.stem[:-2] + "_py.py")
        mine = {m.group(1) for m in re.finditer(r"^([A-Z][A-Z0-9_]+)\s*=", code(path), re.M)}
        copies += [f"{path.name}: {name}" for name in sorted(mine & set(python_constants(twin)))]
    assert not copies


def test_the_bounds_stated_as_numbers() -> None:
    from tokcore.ids._pack_py import MAX_IDS

    assert "C buffers are kept between calls only while at most 64 KiB" in re.sub(
        r"\s+", " ", DESIGN)
    kept = {v for p in compiled().values() for k, v in module_constants(p).items()
            if k == "KEEP_FREED"}
    assert kept == {64 * 1024}
    sentence(r"`convert_ids` reads an input of 64 KiB or more without the GIL")
    nogil = module_constants(PACKAGE / "ids" / "_wire_c.pyx")["NOGIL_MIN_BYTES"]
    assert nogil == 64 * 1024
    sentence(r"An ids call takes at most `sys\.maxsize // 32` ids")
    assert MAX_IDS == sys.maxsize // 32


# --- kernels ---------------------------------------------------------------------------------

def test_the_twins_with_kernels() -> None:
    stated = set(ticked(sentence(r"They are five: ([^.]*)\.").group(1)))
    with_kernels = {name for name, path in compiled().items()
                    if all(f"def {f}(" in code(path)
                           for f in ("_kernels", "_kernel", "_use_kernel"))}
    assert stated == with_kernels and len(stated) == 5


def test_the_kernel_vocabulary() -> None:
    from tokcore._kernels import KERNELS

    stated = ticked(sentence(r"\(`_kernels\.py`\): ([^,]*(?:, `\w+`)*),").group(1))
    assert tuple(stated) == KERNELS


# --- layout ----------------------------------------------------------------------------------

def test_the_count_of_entries_in_tokcore() -> None:
    stated = int(sentence(r"as wings it holds (\d+)").group(1))
    entries = [p for p in PACKAGE.iterdir() if p.name != "__pycache__"
               and (p.is_dir() or p.suffix in (".py", ".pyi", ".pyx", ".pxd", ".h", ".typed"))]
    assert len(entries) == stated, sorted(p.name for p in entries)


@pytest.mark.parametrize("wing", WINGS)
def test_each_wing_says_what_it_holds(wing: str) -> None:
    """Each wing's docstring names its hot paths (the tree is not retold in DESIGN.md)."""
    sentence(r"Each wing's `__init__\.py` docstring says what its modules do")
    doc = ast.get_docstring(ast.parse((PACKAGE / wing / "__init__.py").read_text("utf-8")))
    assert doc, f"tokcore/{wing}/__init__.py has no docstring"
    for path in (PACKAGE / wing).glob("_*_c.pyx"):
        assert path.stem[:-2] in doc, f"tokcore/{wing}/__init__.py does not name {path.stem[:-2]}"


def test_import_tokcore_imports_no_adapter_or_plugin() -> None:
    sentence(r"`import tokcore` imports neither `adapters` nor `plugins`")
    out = subprocess.run([sys.executable, "-c", "import sys, tokcore; print(sorted(m for m in "
                          "sys.modules if m.startswith(('tokcore.adapters', "
                          "'tokcore.plugins'))))"], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_faced_wings() -> None:
    from test_layout import FACED

    sentence(r"the adapters import the stream wing's names from `tokcore\.stream` only")
    assert FACED == frozenset({"adapters"})


# --- what it names ---------------------------------------------------------------------------

FILE = re.compile(r"[\w./-]*\w\.(?:py|pyi|pyx|pxd|h|md|json|toml|yml)\b")


def test_the_files_it_names_exist() -> None:
    """Every file DESIGN.md names: by its path from the root or from tokcore/, or by a name
    that some file of the tree has (a header, a module)."""
    names = {path.name for top in ("tokcore", "tests", "bench", "docs", "tools", "fuzz")
             for path in (ROOT / top).rglob("*")}
    missing = [name for token in ticked(DESIGN) if not re.search(r"[*<]|_x\b|_x_", token)
               for name in FILE.findall(token)
               if not (ROOT / name).exists()
               and not (PACKAGE / name).exists() and name not in names]
    assert not missing, f"DESIGN.md names files that do not exist: {missing}"
    assert (ROOT / ".ci" / "run").is_file()


def test_the_make_targets_it_names_exist() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    targets = {t for line in re.findall(r"^([\w.%-][\w.% -]*):(?!=)", makefile, re.M)
               for t in line.split()}
    named = {m.group(1) for token in ticked(DESIGN) if (m := re.fullmatch(r"make ([\w-]+)", token))}
    assert named and named <= targets, f"not Makefile targets: {sorted(named - targets)}"


def test_the_dependency_groups() -> None:
    stated = ticked(sentence(r"The development dependencies are PEP 735 groups \(([^)]*)\)")
                    .group(1))
    groups = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["dependency-groups"]
    assert set(stated) == set(groups)
    cython = sentence(r"the `build` group's one line, `([^`]+)`").group(1)
    assert [r for r in groups["build"] if isinstance(r, str) and r.startswith("Cython")] == [
        f"Cython{cython}"]


def test_each_test_file_says_what_it_covers() -> None:
    sentence(r"Each test file's docstring says what it covers")
    bare = [str(p.relative_to(ROOT)) for p in sorted((ROOT / "tests").rglob("test_*.py"))
            if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))]
    assert not bare, f"test files without a docstring: {bare}"


def test_no_ci_time_figure() -> None:
    """CI's time budget is stated once, in .ci/run: DESIGN.md points there."""
    sentence(r"within the time budget that `\.ci/run` states")
    assert not re.search(r"\d+ ?(?:minutes|min\b)", DESIGN)


def test_the_guard_tolerance() -> None:
    stated = int(sentence(r"at most (\d+) % over `bench/budgets\.json`").group(1))
    guard = (ROOT / "bench" / "guard.py").read_text(encoding="utf-8")
    tolerance = re.search(r"^TOLERANCE = ([0-9.]+)", guard, re.M)
    assert tolerance and round(float(tolerance.group(1)) * 100) == stated


def test_every_compiled_twin_declares_free_threading() -> None:
    sentence(r"Every compiled twin declares free-threading support")
    silent = [p.name for p in compiled().values()
              if "# cython: freethreading_compatible=True" not in p.read_text("utf-8")]
    assert not silent
