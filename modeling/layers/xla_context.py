"""Whether the code being traced will be compiled by XLA.

Some layers compute the same values two ways, one of which only pays off
inside an XLA program (see `Dropout` and `add_bias`).
"""

from __future__ import annotations

import tensorflow as tf

try:  # TensorFlow marks the graphs of `tf.function(jit_compile=True)` with an XLA context.
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - a TensorFlow without it keeps the Keras path
    GraphOrParentsInXlaContext = None


def compiled_by_xla() -> bool:
    """True while tracing a function that XLA will compile (`jit_compile=True`, TPUs)."""
    if GraphOrParentsInXlaContext is None or tf.executing_eagerly():
        return False
    return bool(GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
