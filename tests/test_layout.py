"""The wings import one way: ALLOWED says which wing of tokcore/ may import which, and the tests
read every import the package's sources make and hold each to it (in the spirit of multidict's
test of circular imports: the layout DESIGN.md writes down is checked, not only written).

What counts as an import, read from the files (nothing is imported or compiled):
- ``.py`` and ``.pyi``: every ``import`` and ``from ... import`` (ast), a function's and an
  ``if TYPE_CHECKING:`` block's included, relative ones resolved;
- ``.pyx``, ``.pxd``, ``.pxi``: ``import``, ``cimport``, ``from ... (c)import``, ``include``
  and ``cdef extern from "header"`` (its docstrings and comments left out first);
- ``.h``: ``#include "header"``.
A header is found as the compiler finds it: beside the file first, then in tokcore/ (the
include path). A file's wing is its first folder under tokcore/; the root's own files are
the wing ``root``, but for ``__init__.py`` and ``__main__.py``, the public API (``api``),
which imports every wing and which no wing imports. So a wing is a folder: moving a file
between folders moves it between wings, and a new folder needs its row in ALLOWED.
"""

from __future__ import annotations

import ast
import functools
import posixpath
import re
from pathlib import PurePosixPath
from typing import NamedTuple

import pytest
from _twins import ROOT

PACKAGE = ROOT / "tokcore"
DESIGN = ROOT / "DESIGN.md"

#: the root's files that are the public API rather than the root's shared pieces
API_FILES = ("__init__.py", "__main__.py")

#: which wings each wing may import (its own always); the same table is DESIGN.md's layout
ALLOWED: dict[str, frozenset[str]] = {
    "api": frozenset({"root", "ids", "members", "stream", "writer", "pickling"}),
    "root": frozenset(),
    "ids": frozenset({"root"}),
    "members": frozenset({"root"}),
    "stream": frozenset({"root", "members"}),
    "writer": frozenset({"root"}),
    "pickling": frozenset({"root", "ids"}),
    "adapters": frozenset({"root", "stream"}),
    "plugins": frozenset({"root", "writer"}),
}

#: the wings that reach another wing (the root aside) only through its face: the names its
#: package's ``__init__.py`` gives (``from ..stream import UsageRelay``), none private; never
#: a module of it, a twin or a dispatcher
FACED = frozenset({"adapters"})

SOURCES = (".py", ".pyi", ".pyx", ".pxd", ".pxi", ".h")
CYTHON = (".pyx", ".pxd", ".pxi")


class Import(NamedTuple):
    file: str  # under tokcore/, posix
    line: int
    statement: str  # as written (its first line)
    target: str  # a module ("tokcore.stream._relay") or a file under tokcore/ ("_cpu.h")


def wing_of_file(relative: PurePosixPath) -> str:
    if len(relative.parts) > 1:
        return relative.parts[0]
    return "api" if relative.name in API_FILES else "root"


def wing_of_module(module: str) -> str | None:
    """The wing of a module of the package (None for any other module)."""
    parts = module.split(".")
    if parts[0] != "tokcore":
        return None
    if len(parts) == 1:
        return "api"
    if (PACKAGE / parts[1]).is_dir():
        return parts[1]
    return "api" if f"{parts[1]}.py" in API_FILES else "root"


def package_of(relative: PurePosixPath) -> list[str]:
    """The package a file's relative imports start from."""
    return ["tokcore", *relative.parent.parts]


def absolute(relative: PurePosixPath, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = package_of(relative)
    base = base[:len(base) - (level - 1)]
    return ".".join([*base, *([module] if module else [])])


def is_module(module: str) -> bool:
    path = PACKAGE.parent.joinpath(*module.split("."))
    return path.is_dir() or any(path.with_name(path.name + s).exists() for s in SOURCES)


def from_targets(module: str, names: list[str]) -> list[str]:
    """``from module import a, b``: each name that is a module of its own, else the module."""
    subs = [f"{module}.{n}" for n in names if is_module(f"{module}.{n}")]
    return subs if len(subs) == len(names) else [module, *subs]


def python_imports(relative: PurePosixPath, text: str) -> list[Import]:
    found: list[Import] = []
    lines = text.splitlines()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = absolute(relative, node.level, node.module)
            targets = from_targets(module, [alias.name for alias in node.names])
        else:
            continue
        statement = lines[node.lineno - 1].strip()
        found += [Import(relative.as_posix(), node.lineno, statement, t) for t in targets]
    return found


STRING_OR_COMMENT = re.compile(r'"""[\s\S]*?"""|\'\'\'[\s\S]*?\'\'\'|#[^\n]*')
CYTHON_FROM = re.compile(r"^[ \t]*from[ \t]+(\.*)([\w.]*)[ \t]+c?import[ \t]+(\([^)]*\)|[^\n]*)",
                         re.M)
CYTHON_IMPORT = re.compile(r"^[ \t]*c?import[ \t]+([^\n]+)", re.M)
CYTHON_FILE = re.compile(r'^[ \t]*(?:include|cdef[ \t]+extern[ \t]+from)[ \t]+"([^"]+)"', re.M)
C_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]+"([^"]+)"', re.M)
C_COMMENT = re.compile(r"/\*[\s\S]*?\*/|//[^\n]*")


def blank(match: re.Match[str]) -> str:
    """A string or comment cut out, its line ends kept (so line numbers stay right)."""
    return "\n" * match.group().count("\n")


def line_of(text: str, offset: int) -> tuple[int, str]:
    start = text.rfind("\n", 0, offset) + 1
    end = text.find("\n", offset)
    return text.count("\n", 0, offset) + 1, text[start:end if end >= 0 else None].strip()


def header(relative: PurePosixPath, name: str) -> str | None:
    """The package's file that ``#include "name"`` reads: beside the file, then tokcore/."""
    for candidate in (posixpath.join(relative.parent.as_posix(), name), name):
        candidate = posixpath.normpath(candidate)
        if not candidate.startswith("../") and (PACKAGE / candidate).is_file():
            return candidate
    return None


def cython_imports(relative: PurePosixPath, text: str) -> list[Import]:
    code = STRING_OR_COMMENT.sub(blank, text)
    found: list[Import] = []
    for match in CYTHON_FROM.finditer(code):
        dots, module, names = match.groups()
        module = absolute(relative, len(dots), module or None)
        names = [n.split()[0] for n in names.strip("()").replace("\n", " ").split(",")
                 if n.strip()]
        line, statement = line_of(code, match.start())
        found += [Import(relative.as_posix(), line, statement, t)
                  for t in from_targets(module, names)]
    for match in CYTHON_IMPORT.finditer(code):
        line, statement = line_of(code, match.start())
        found += [Import(relative.as_posix(), line, statement, name.split()[0])
                  for name in match.group(1).split(",") if name.strip()]
    for match in CYTHON_FILE.finditer(code):
        target = header(relative, match.group(1))
        if target is not None:
            line, statement = line_of(code, match.start())
            found.append(Import(relative.as_posix(), line, statement, target))
    return found


def c_imports(relative: PurePosixPath, text: str) -> list[Import]:
    code = C_COMMENT.sub(blank, text)
    found: list[Import] = []
    for match in C_INCLUDE.finditer(code):
        target = header(relative, match.group(1))
        if target is not None:
            line, statement = line_of(code, match.start())
            found.append(Import(relative.as_posix(), line, statement, target))
    return found


def sources() -> list[PurePosixPath]:
    return sorted(PurePosixPath(p.relative_to(PACKAGE).as_posix()) for p in PACKAGE.rglob("*")
                  if p.suffix in SOURCES and "__pycache__" not in p.parts)


def imports_of(relative: PurePosixPath) -> list[Import]:
    text = (PACKAGE / relative).read_text(encoding="utf-8")
    if relative.suffix in (".py", ".pyi"):
        return python_imports(relative, text)
    if relative.suffix in CYTHON:
        return cython_imports(relative, text)
    return c_imports(relative, text)


def target_wing(imported: Import) -> str | None:
    if "/" in imported.target or imported.target.endswith((".h", ".pxi", ".pxd")):
        return wing_of_file(PurePosixPath(imported.target))
    return wing_of_module(imported.target)


@functools.cache
def crossings() -> dict[str, list[tuple[Import, str]]]:
    """Each wing's imports of another wing, with the wing imported."""
    found: dict[str, list[tuple[Import, str]]] = {}
    for relative in sources():
        own = wing_of_file(relative)
        for imported in imports_of(relative):
            other = target_wing(imported)
            if other is not None and other != own:
                found.setdefault(own, []).append((imported, other))
    return found


def allowed_text(wing: str) -> str:
    return ", ".join(sorted(ALLOWED[wing])) or "no other wing"


@pytest.mark.parametrize("wing", sorted(ALLOWED))
def test_the_wing_imports_only_what_the_table_allows(wing: str) -> None:
    wrong = [f"tokcore/{i.file}:{i.line}: `{i.statement}` imports the {other} wing "
             f"({i.target}); the rule: the {wing} wing may import {allowed_text(wing)} "
             f"(ALLOWED in tests/test_layout.py, the layout in DESIGN.md)"
             for i, other in crossings().get(wing, []) if other not in ALLOWED[wing]]
    assert not wrong, "\n".join(wrong)


def test_every_folder_of_the_package_is_a_wing_of_the_table() -> None:
    wings = {wing_of_file(path) for path in sources()}
    assert wings <= set(ALLOWED), (
        f"no row in ALLOWED for {sorted(wings - set(ALLOWED))}: give the new wing its row "
        "(and DESIGN.md's layout its line)")


def test_the_table_has_no_circle() -> None:
    def reach(wing: str) -> set[str]:
        seen: set[str] = set()
        todo = list(ALLOWED[wing])
        while todo:
            other = todo.pop()
            if other not in seen:
                seen.add(other)
                todo += ALLOWED[other]
        return seen

    assert [wing for wing in ALLOWED if wing in reach(wing)] == []
    assert [wing for wing in ALLOWED if "api" in ALLOWED[wing]] == []


def test_the_reader_sees_each_kind_of_import() -> None:
    """Each way one wing reaches another is read (so an empty answer is not a blind reader)."""
    seen = {(i.file, i.target) for found in crossings().values() for i, _ in found}
    kinds = {target for _, target in seen}
    assert "tokcore._freethreading" in kinds  # a Cython cimport of the root
    assert "_cpu.h" in kinds  # a header's #include, and a .pyx's cdef extern from
    assert any(t.startswith("tokcore.members._members_c") for t in kinds)  # stream cimports
    assert any(f.startswith("adapters/") and t.startswith("tokcore.stream")
               for f, t in seen)  # a relative import, resolved
    assert any(f == "__init__.py" for f, _ in seen)


def face_breaches(relative: PurePosixPath, text: str) -> list[str]:
    """The imports of a faced wing's Python file that go past another wing's face: a module
    of the wing (its ``_py`` twin, a dispatcher) or a private name of its package."""
    own = wing_of_file(relative)
    found = []
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, ast.Import):
            taken = [(alias.name, "") for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = absolute(relative, node.level, node.module)
            taken = [(module, alias.name) for alias in node.names]
        else:
            continue
        for module, name in taken:
            if name and is_module(f"{module}.{name}"):  # (a module taken by name)
                module, name = f"{module}.{name}", ""
            wing = wing_of_module(module)
            if wing in (None, own, "root"):
                continue
            face = f"tokcore.{wing}" if wing != "api" else "tokcore"
            if module != face or name.startswith("_"):
                what = f"{module}.{name}" if name else module
                found.append(f"tokcore/{relative}:{node.lineno}: {what}: the {own} wing takes "
                             f"another wing's names from its face only (`from {face} import "
                             "...`, no private name); give the name there")
    return found


@pytest.mark.parametrize("wing", sorted(FACED))
def test_a_faced_wing_uses_the_other_wings_faces_only(wing: str) -> None:
    wrong = [breach for relative in sources()
             if wing_of_file(relative) == wing and relative.suffix in (".py", ".pyi")
             for breach in face_breaches(relative, (PACKAGE / relative).read_text("utf-8"))]
    assert not wrong, "\n".join(wrong)
    assert not [p for p in sources() if wing_of_file(p) == wing
                and p.suffix not in (".py", ".pyi")], f"the {wing} wing is Python only"


def test_the_face_check_sees_each_way_past_a_face() -> None:
    """A twin, a dispatcher, a private name and an absolute import are each found."""
    text = ("from ..stream._relay_py import DEFAULT_MAX_EVENT_BYTES\n"
            "from ..stream._relay import UsageRelay\n"
            "from ..stream import _relay_of, UsageRelay\n"
            "import tokcore.stream._usage\n"
            "from .. import _args\n"
            "from ..stream import relay_of\n"
            "from ..stream import _relay_iter\n")
    breaches = face_breaches(PurePosixPath("adapters/x.py"), text)
    assert [b.split(":")[1] for b in breaches] == ["1", "2", "3", "4", "7"]


def test_design_states_the_same_table() -> None:
    """DESIGN.md's layout holds the table as `| wing | may import |` rows."""
    text = DESIGN.read_text(encoding="utf-8")
    rows = re.findall(r"^\| `(\w+)` \| ([^|\n]*) \|$", text, re.M)
    stated = {wing: frozenset(re.findall(r"`(\w+)`", imports)) for wing, imports in rows}
    assert stated == ALLOWED, "DESIGN.md's table of the wings and tests/test_layout.py differ"
