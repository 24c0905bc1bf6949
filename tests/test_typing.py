"""The public API's static types: the Cython stubs say what the Python twins say.

Type checkers read the Python twins (each dispatcher imports its ``_x_py`` names under
``TYPE_CHECKING``), while the Cython twin runs; so each ``_x_c.pyi`` must declare exactly
what its Python twin's code does. Compared here from the source of both: the same names,
each parameter's name, kind, annotation (as written) and default (a stub's ``...`` stands for
the twin's), the same return annotations and properties, and every annotation name bound to
the same object on both sides. With the Cython twins loaded, their run-time signatures must
match the Python twins' too.

``make lint`` runs mypy --strict and pyright on tests/typing/public_api.py and mypy's stubtest
(the stubs against the compiled modules); here public_api.py also runs on the twin that
loaded, so what the types accept works and what they reject raises.
"""

from __future__ import annotations

import ast
import builtins
import importlib
import importlib.util
import inspect
import os
import re
import subprocess
import sys
import typing
from pathlib import Path
from types import ModuleType
from typing import Any, NamedTuple

import pytest
from _twins import HOT_PATHS, ROOT

import tokcore
from tokcore._args import Api
from tokcore._backend import LOADED, NO_EXTENSIONS
from tokcore.stream._dialects import DIALECTS

#: the tokcore under test: the source tree, or site-packages for a suite run on a wheel
PACKAGE = Path(tokcore.__file__).resolve().parent
PUBLIC_API = ROOT / "tests" / "typing" / "public_api.py"
#: hot path -> its dispatcher module (tests/_twins.py's table); the big-event scanner has
#: none: the relay twins import its twins directly
TWINS = dict(HOT_PATHS)
NO_DISPATCHER = {"bigevent"}


def source_of(module: str, suffix: str) -> Path:
    """The file of module ``tokcore.<...>`` under the tokcore under test, with ``suffix``."""
    return PACKAGE.joinpath(*module.split(".")[1:]).with_suffix(suffix)
#: stub decorators that say something about the compiled class only (PEP 800)
STUB_ONLY_DECORATORS = {"disjoint_base"}

Node = ast.FunctionDef | ast.AsyncFunctionDef


class Param(NamedTuple):
    name: str
    kind: str
    annotation: str | None
    default: str | None


def text(node: ast.AST | None) -> str | None:
    return None if node is None else ast.unparse(node)


def params(fn: Node) -> list[Param]:
    args = fn.args
    positional = [*args.posonlyargs, *args.args]
    defaults: list[ast.expr | None] = [None] * (len(positional) - len(args.defaults))
    defaults += args.defaults
    out = [Param(a.arg, "positional-only" if i < len(args.posonlyargs) else "positional",
                 text(a.annotation), text(d))
           for i, (a, d) in enumerate(zip(positional, defaults))]
    if args.vararg:
        out.append(Param(args.vararg.arg, "*args", text(args.vararg.annotation), None))
    out += [Param(a.arg, "keyword-only", text(a.annotation), text(d))
            for a, d in zip(args.kwonlyargs, args.kw_defaults)]
    if args.kwarg:
        out.append(Param(args.kwarg.arg, "**kwargs", text(args.kwarg.annotation), None))
    return out


def setter_name(fn: Node) -> str:
    """A method's name, ``name.setter`` for a property's setter."""
    return f"{fn.name}.setter" if f"{fn.name}.setter" in decorators(fn) else fn.name


def decorators(fn: Node | ast.ClassDef) -> set[str]:
    return {ast.unparse(d) for d in fn.decorator_list} - STUB_ONLY_DECORATORS


def names_in(annotation: str | None) -> set[str]:
    if annotation is None:
        return set()
    return {n.id for n in ast.walk(ast.parse(annotation, mode="eval")) if isinstance(n, ast.Name)}


def version_gate(node: ast.AST) -> str | None:
    """``"X.Y"`` for an ``if`` that picks definitions by ``sys.version_info >= (X, Y)`` (the
    typed twin adds the run-time probe for its run-time branch: ``_b64_py``), else None."""
    if not isinstance(node, ast.If):
        return None
    found = re.search(r"sys\.version_info >= \((\d+), (\d+)\)", ast.unparse(node.test))
    return f"{found[1]}.{found[2]}" if found else None


class Source:
    """The top-level definitions of one module's source, and how it binds names."""

    def __init__(self, module: str, source: str) -> None:
        self.module = module
        self.tree = ast.parse(source)
        self.defs: dict[str, ast.AST] = {}
        self.imports: dict[str, tuple[str, str]] = {}  # bound name -> (module, name)
        for node in self.tree.body:
            gate = version_gate(node)
            if gate is not None:  # if sys.version_info >= (X, Y): ... else: ...
                assert isinstance(node, ast.If)
                for branch, suffix in ((node.body, ""), (node.orelse, f" (before {gate})")):
                    for inner in branch:
                        if isinstance(inner, (ast.FunctionDef, ast.AsyncFunctionDef)):
                            self.defs[inner.name + suffix] = inner
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.defs[node.name] = node
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.defs[node.target.id] = node
            elif isinstance(node, ast.ImportFrom):
                package = module.rpartition(".")[0]  # where its relative imports start
                base = importlib.util.resolve_name("." * node.level + (node.module or ""),
                                                   package) if node.level else node.module
                for alias in node.names:
                    self.imports[alias.asname or alias.name] = (str(base), alias.name)


def bound_object(name: str, stub: Source, twin: ModuleType) -> object:
    """What ``name`` in a stub annotation is at run time."""
    if name in stub.imports:
        module, attr = stub.imports[name]
        return getattr(importlib.import_module(module), attr)
    if name in stub.defs:  # a class of the stub: the twin's class of that name
        return getattr(twin, name)
    return getattr(builtins, name)


def twin_object(name: str, twin: ModuleType) -> object:
    if hasattr(twin, name):
        return getattr(twin, name)
    return getattr(builtins, name)


def compare_function(where: str, stub_fn: Node, twin_fn: Node, method: bool) -> list[str]:
    problems = []
    # a Cython slot method (__get__, ...) is positional-only: its Python twin need not be
    slot = (method and stub_fn.name != "__init__" and stub_fn.name.startswith("__")
            and stub_fn.name.endswith("__"))
    stub_params, twin_params = params(stub_fn), params(twin_fn)
    if len(stub_params) != len(twin_params):
        return [f"{where}: parameters {[p.name for p in stub_params]} in the stub, "
                f"{[p.name for p in twin_params]} in the Python twin"]
    for s, t in zip(stub_params, twin_params):
        same_kind = s.kind == t.kind or (slot and {s.kind, t.kind} == {"positional-only",
                                                                        "positional"})
        if s.name != t.name or not same_kind:
            problems.append(f"{where}: parameter {s.name} ({s.kind}) in the stub, "
                            f"{t.name} ({t.kind}) in the Python twin")
        if s.annotation != t.annotation:
            problems.append(f"{where}({s.name}): annotated {s.annotation} in the stub, "
                            f"{t.annotation} in the Python twin")
        if (s.default is None) != (t.default is None) or (
                s.default not in (None, "...") and s.default != t.default):
            problems.append(f"{where}({s.name}): default {s.default} in the stub, "
                            f"{t.default} in the Python twin")
    if text(stub_fn.returns) != text(twin_fn.returns):
        problems.append(f"{where}: returns {text(stub_fn.returns)} in the stub, "
                        f"{text(twin_fn.returns)} in the Python twin")
    if decorators(stub_fn) != decorators(twin_fn):
        problems.append(f"{where}: decorated {sorted(decorators(stub_fn))} in the stub, "
                        f"{sorted(decorators(twin_fn))} in the Python twin")
    return problems


def init_attribute(cls: ast.ClassDef, name: str) -> str | None:
    """The annotation of ``self.<name>`` as the twin's ``__init__`` sets it: the class's own
    annotation, or that of the ``__init__`` parameter it is assigned from."""
    for node in cls.body:
        if isinstance(node, ast.AnnAssign) and text(node.target) == name:
            return text(node.annotation)
    init = next((n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "__init__"),
                None)
    if init is None:
        return None
    annotations = {p.name: p.annotation for p in params(init)}
    for node in ast.walk(init):
        if (isinstance(node, ast.Assign) and len(node.targets) == 1
                and text(node.targets[0]) == f"self.{name}" and isinstance(node.value, ast.Name)):
            return annotations.get(node.value.id)
    return None


def compare_class(stub_cls: ast.ClassDef, twin_cls: ast.ClassDef, whole: bool) -> list[str]:
    """``whole``: the stub declares the class's whole Python surface (a dispatched class)."""
    problems = []
    # a property's setter is a member of its own (the same name, ``@name.setter``)
    twin_members = {setter_name(n): n for n in twin_cls.body
                    if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    declared = set()
    for node in stub_cls.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            declared.add(setter_name(node))
            where = f"{stub_cls.name}.{setter_name(node)}"
            if setter_name(node) not in twin_members:
                problems.append(f"{where}: not in the Python twin")
                continue
            problems += compare_function(where, node, twin_members[setter_name(node)],
                                         method=True)
        elif isinstance(node, ast.AnnAssign):
            name = str(text(node.target))
            declared.add(name)
            twin_annotation = init_attribute(twin_cls, name)
            if twin_annotation != text(node.annotation):
                problems.append(f"{stub_cls.name}.{name}: annotated {text(node.annotation)} in "
                                f"the stub, {twin_annotation} in the Python twin")
    if whole:
        for name in twin_members:
            public = not name.startswith("_") or (name.startswith("__") and name.endswith("__"))
            if public and name not in declared:
                problems.append(f"{stub_cls.name}.{name}: in the Python twin, not in the stub")
    return problems


def annotation_names(node: ast.AST) -> set[str]:
    found: set[str] = set()
    for fn in ast.walk(node):
        if isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)):
            for p in params(fn):
                found |= names_in(p.annotation)
            found |= names_in(text(fn.returns))
        elif isinstance(fn, ast.AnnAssign):
            found |= names_in(text(fn.annotation))
    return found


def dispatched(dispatcher: str) -> tuple[set[str], set[str]]:
    """The names a dispatcher takes from the loaded twin at run time, and those it imports
    from the Python twin for checkers (under ``if TYPE_CHECKING``)."""
    tree = ast.parse(source_of(dispatcher, ".py").read_text())
    at_run_time = {node.targets[0].id for node in ast.walk(tree)
                   if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name)
                   and isinstance(node.value, ast.Attribute) and text(node.value.value) == "_twin"}
    for_checkers: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.If) and text(node.test) == "TYPE_CHECKING":
            for imp in node.body:
                twin = f"{dispatcher.rsplit('.', 1)[1]}_py"  # imported relatively: ._x_py
                assert isinstance(imp, ast.ImportFrom) and imp.module == twin
                for_checkers |= {alias.name for alias in imp.names}
    return at_run_time, for_checkers


def compare(name: str, stub_text: str, twin_text: str, twin: ModuleType,
            required: set[str]) -> list[str]:
    """Every difference between the stub of twin ``name`` and its Python twin."""
    stub = Source(f"{TWINS[name]}_c", stub_text)
    py = Source(f"{TWINS[name]}_py", twin_text)
    problems = [f"{n}: dispatched, not declared in the stub" for n in required - set(stub.defs)]
    for n, node in stub.defs.items():
        twin_node = py.defs.get(n)
        if twin_node is None:
            # what only the compiled twin has (BUILD_INFO, test hooks): constants and
            # private names, nothing that a dispatcher takes
            if n in required or not (isinstance(node, ast.AnnAssign) or n.startswith("_")):
                problems.append(f"{n}: declared in the stub, not in the Python twin")
            continue
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            if not isinstance(twin_node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                problems.append(f"{n}: a function in the stub, not in the Python twin")
                continue
            problems += compare_function(n, node, twin_node, method=False)
        elif isinstance(node, ast.ClassDef):
            if not isinstance(twin_node, ast.ClassDef):
                problems.append(f"{n}: a class in the stub, not in the Python twin")
                continue
            problems += compare_class(node, twin_node, whole=n in required)
        for used in sorted(annotation_names(node)):
            try:
                stub_obj = bound_object(used, stub, twin)
            except AttributeError:
                problems.append(f"{n}: the stub's {used} is bound to nothing")
                continue
            if twin_object(used, twin) is not stub_obj:
                problems.append(f"{n}: {used} is not the same object in the stub and the "
                                "Python twin")
    return problems


def stub_and_twin(name: str) -> tuple[str, str, ModuleType, set[str]]:
    module = TWINS[name]
    required = set() if name in NO_DISPATCHER else dispatched(module)[0]
    return (source_of(f"{module}_c", ".pyi").read_text(),
            source_of(f"{module}_py", ".py").read_text(),
            importlib.import_module(f"{module}_py"), required)


@pytest.mark.parametrize("name", sorted(TWINS))
def test_stub_declares_what_the_python_twin_does(name: str) -> None:
    assert compare(name, *stub_and_twin(name)) == []


@pytest.mark.parametrize("name", sorted(set(TWINS) - NO_DISPATCHER))
def test_checkers_see_the_names_that_run(name: str) -> None:
    at_run_time, for_checkers = dispatched(TWINS[name])
    assert at_run_time and at_run_time == for_checkers


# A broken stub is found: each change below, made to a copy of a stub, is reported.
MUTATIONS = [
    ("pack", "-> list[int]", "-> list[str]", "unpack_ids: returns list[str]"),
    ("pack", "data: BytesLike", "data: Any", "unpack_ids(data): annotated Any"),
    ("pack", "def pack_ids(ids: IdsArg,", "def pack_ids(values: IdsArg,", "parameter values"),
    ("pack", "def pack_ids(ids: IdsArg, *, width: Width = 32)",
     "def pack_ids(ids: IdsArg, *, width: int = 32)", "annotated int"),
    ("b64", "*, validate: bool = False", "validate: bool = False", "(positional) in the stub"),
    ("b64", "validate: bool = False, width", "validate: bool = True, width", "default True"),
    ("b64", "from .._args import BytesLike, TextOrBytes",
     "from .._args import TextOrBytes\nfrom builtins import bytes as BytesLike",
     "BytesLike is not the same object"),
    ("usage", 'api: Api = "chat") -> Span', 'api: str = "chat") -> Span', "annotated str"),
    ("relay", "    def close(self) -> bytes: ...\n", "", "UsageRelay.close: in the Python twin"),
    ("relay", "    @property\n    def counts", "    def counts", "UsageRelay.counts: decorated []"),
    ("events", "def iter_events(", "def iter_event(", "iter_events: dispatched, not declared"),
    ("members", "def find_member(payload: BytesLike, path: KeyPath)",
     "def find_member(payload: BytesLike, path: str)", "find_member(path): annotated str"),
    ("lazy", "    name: str\n    default", "    name: bytes\n    default", "LazyAttr.name"),
]


@pytest.mark.parametrize(("name", "old", "new", "expected"), MUTATIONS)
def test_a_wrong_stub_is_reported(name: str, old: str, new: str, expected: str) -> None:
    stub_text, twin_text, twin, required = stub_and_twin(name)
    assert stub_text.count(old) == 1
    problems = compare(name, stub_text.replace(old, new), twin_text, twin, required)
    assert any(expected in problem for problem in problems), problems


def run_time_signature(obj: object) -> inspect.Signature | None:
    """None for what has no signature of its own at run time (a Cython class's slots)."""
    try:
        signature = inspect.signature(obj)  # type: ignore[arg-type]
    except ValueError:
        return None
    kinds = [p.kind for p in signature.parameters.values()]
    if inspect.Parameter.VAR_POSITIONAL in kinds and inspect.Parameter.VAR_KEYWORD in kinds:
        return None  # (self, /, *args, **kwargs): a slot wrapper
    return signature


def runtime_pairs() -> list[tuple[str, object, object]]:
    """(what, the Cython twin's object, the Python twin's) for each function and method the
    stubs declare."""
    pairs = []
    for name, module in TWINS.items():
        stub = Source(f"{module}_c", source_of(f"{module}_c", ".pyi").read_text())
        compiled = importlib.import_module(f"{module}_c")
        python = importlib.import_module(f"{module}_py")
        for n, node in stub.defs.items():
            if not hasattr(python, n):
                continue
            if isinstance(node, ast.FunctionDef):
                pairs.append((f"_{name}.{n}", getattr(compiled, n), getattr(python, n)))
            elif isinstance(node, ast.ClassDef):
                for member in node.body:
                    if isinstance(member, ast.FunctionDef) and not decorators(member):
                        pairs.append((f"_{name}.{n}.{member.name}",
                                      getattr(getattr(compiled, n), member.name),
                                      getattr(getattr(python, n), member.name)))
    return pairs


@pytest.mark.skipif(NO_EXTENSIONS, reason="TOKCORE_NO_EXTENSIONS is set: no Cython twins")
def test_compiled_signatures_match_the_python_twins() -> None:
    unsigned = []
    for what, compiled, python in runtime_pairs():
        signature = run_time_signature(compiled)
        if signature is None:
            unsigned.append(what)
            continue
        expected = inspect.signature(python)  # type: ignore[arg-type]
        if what.split(".")[-1].startswith("__"):  # slots: positional-only, names aside
            assert len(signature.parameters) == len(expected.parameters), what
            continue
        unannotated = [p.replace(annotation=p.empty) for p in expected.parameters.values()]
        assert signature == expected.replace(parameters=unannotated,
                                             return_annotation=inspect.Signature.empty), what
    # only the classes' __init__ slots go unchecked here (tests of each twin call them)
    assert sorted(unsigned) == ["_bigevent.BigEvent.__init__", "_events.EventDecoder.__init__",
                                "_lazy.LazyAttr.__init__", "_lazy.LazySlot.__init__",
                                "_relay.UsageRelay.__init__", "_writer.StreamWriter.__init__"]


def test_api_literal_names_the_dialects() -> None:
    assert typing.get_args(Api) == tuple(DIALECTS)


def test_every_public_name_has_a_typing_sample() -> None:
    samples = PUBLIC_API.read_text()
    imported = set(Source("public_api", samples).imports)
    missing = [n for n in tokcore.__all__
               if not re.search(rf"\btokcore\.{n}\b", samples) and n not in imported]
    assert missing == []


@pytest.mark.parametrize("env", ["TOKCORE_NO_EXTENSIONS", "TOKCORE_REQUIRE_EXTENSIONS"])
def test_typing_extensions_is_not_imported_at_run_time(env: str) -> None:
    if env == "TOKCORE_REQUIRE_EXTENSIONS" and NO_EXTENSIONS:
        pytest.skip("TOKCORE_NO_EXTENSIONS is set: the Cython twins are not under test")
    code = ("import sys, tokcore, tokcore.stream._relay_iter, tokcore.pickling; "
            "assert 'typing_extensions' not in sys.modules, 'typing_extensions imported'")
    environment = {k: v for k, v in os.environ.items() if not k.startswith("TOKCORE_")}
    environment.update({"PYTHONPATH": str(PACKAGE.parent), env: "1"})
    subprocess.run([sys.executable, "-c", code], check=True, env=environment, cwd=PACKAGE.parent)


def load_public_api() -> Any:
    spec = importlib.util.spec_from_file_location("public_api", PUBLIC_API)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its classes are pickled by reference
    spec.loader.exec_module(module)
    return module


def test_the_typing_samples_run() -> None:
    load_public_api().run_all()


def test_dispatchers_bind_the_twin_that_loaded() -> None:
    for name, dispatcher in TWINS.items():
        if name in NO_DISPATCHER:
            continue
        module = importlib.import_module(dispatcher)
        kind = "py" if LOADED[dispatcher.removeprefix("tokcore.")] == "python" else "c"
        twin = importlib.import_module(f"{dispatcher}_{kind}")
        for n in dispatched(dispatcher)[0]:
            assert getattr(module, n) is getattr(twin, n)
