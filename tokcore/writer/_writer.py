"""Stream writer dispatcher: the Cython twin when it loads, else the Python one.

The shapes (``StreamShape``, compiled from probes: ``_writer_shape``), the sentinels
(``PROBE``) and the argument tuples are shared by both twins.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._writer_py import Step, TokenLogprob, TopLogprob, Usage
from ._writer_rules import PROBE, Probe
from ._writer_shape import StreamShape

# Checkers read the Python twin, typed and checked with the code; the Cython twin's stub
# declares the same signatures (tests/test_typing.py compares them). At run time the twin
# that loads is used.
if TYPE_CHECKING:
    from ._writer_py import StreamWriter
else:
    from .._backend import load_twin

    _twin = load_twin(__name__)

    StreamWriter = _twin.StreamWriter

__all__ = ["PROBE", "Probe", "Step", "StreamShape", "StreamWriter", "TokenLogprob", "TopLogprob",
           "Usage"]
