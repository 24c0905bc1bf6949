"""Stream writer dispatcher: the Cython twin when it loads, else the Python one.

The shapes (``StreamShape``, compiled from probes: ``_writer_shape``), the sentinels
(``PROBE``) and the argument tuples are shared by both twins.
"""

from __future__ import annotations

# The Python twin alone for now (its Cython twin follows).
from ._writer_py import Step, StreamWriter, TokenLogprob, TopLogprob, Usage
from ._writer_rules import PROBE, Probe
from ._writer_shape import StreamShape

__all__ = ["PROBE", "Probe", "Step", "StreamShape", "StreamWriter", "TokenLogprob", "TopLogprob",
           "Usage"]
