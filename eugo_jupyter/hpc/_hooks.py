"""hpc's old name for :mod:`eugo_jupyter._hooks`, the same module object (one state).

Kept only while ``hpc/optimize`` still writes ``from .. import _hooks``; new code imports the
leaf module, which the Jupyter server can load without loading hpc.
"""

import sys

from .. import _hooks
from .._hooks import optimize_default as optimize_default

sys.modules[__name__] = _hooks
