"""Sphinx configuration: MyST markdown pages, the furo theme, autodoc of the Python twins.

``make docs`` builds with ``TOKCORE_NO_EXTENSIONS=1`` (the typed Python twins, whose
signatures are the stubs'), warnings as errors and nitpicky references.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("TOKCORE_NO_EXTENSIONS", "1")

import tokcore  # noqa: E402

project = "tokcore"
author = "the tokcore authors"
copyright = "the tokcore authors, Apache-2.0"
release = version = tokcore.__version__

extensions = ["myst_parser", "sphinx.ext.autodoc"]
source_suffix = {".md": "markdown"}
exclude_patterns = ["_build"]
myst_enable_extensions = ["colon_fence", "deflist"]
myst_heading_anchors = 3

html_theme = "furo"
html_title = f"tokcore {release}"
# the examples' long output lines wrap (_static/wrap.css); _static also holds the charts
html_static_path = ["_static"]
html_css_files = ["wrap.css"]

# The signatures as written in the code (the aliases by name, documented on the API page).
autodoc_typehints = "signature"
autodoc_typehints_format = "short"
autodoc_member_order = "bysource"
autodoc_preserve_defaults = True
autodoc_type_aliases = {name: f"tokcore.{name}"
                        for name in ("BytesLike", "TextOrBytes", "IdsArg", "Api", "Span",
                                     "IdFormat", "Width")}
autodoc_default_options = {"exclude-members": "__init__, __new__"}

# Nitpicky: every reference must resolve, except to other projects' names (no intersphinx:
# the build needs no network) and to private helper types of the signatures.
nitpicky = True
nitpick_ignore_regex = [
    (r"py:.*", r"(collections\.abc|typing|typing_extensions|types|asyncio)\..*"),
    (r"py:.*", r"(aiohttp|starlette|httpx|yarl)(\..*)?"),
    # the frames' source in the adapters' signatures (documented: tokcore.adapters.frames)
    (r"py:class", r"FrameSource"),
    (r"py:.*", r"(Iterable|Iterator|AsyncIterable|AsyncIterator|AsyncGenerator|Generator"
               r"|Callable|Mapping|Coroutine|Any|TracebackType|SupportsIndex|_T|T)"),
    (r"py:.*", r"(ClientResponse|BaseRequest|StreamResponse|BackgroundTask|Receive|Scope"
               r"|Send|Response|AsyncClient|Client|URL|ClientSession|web\..*)"),
    # the answer classes' type variables (the stream type of an answer, the answer class)
    (r"py:.*", r"tokcore\.adapters\.answer\.[SA]"),
]
nitpick_ignore_regex.append((r"py:.*", r".*\._T"))  # compact_ids' class type variable


def _alias_names(app: object, what: str, name: str, obj: object, options: object,
                 signature: str | None, annotation: str | None) -> tuple[str | None, str | None]:
    """Sphinx writes an alias inside a union as ``TypeAliasForwardRef('x')``: write ``x``."""
    def fix(text: str | None) -> str | None:
        return re.sub(r"TypeAliasForwardRef\('([\w.]+)'\)", r"\1", text) if text else text

    return fix(signature), fix(annotation)


def setup(app: Any) -> None:
    app.connect("autodoc-process-signature", _alias_names)
