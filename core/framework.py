"""The one module that reaches into Keras and TensorFlow internals.

Everything here uses a name the frameworks do not promise to keep. Keeping
those uses together means an upgrade that moves one breaks here, with a
message that names what moved, rather than deep inside a training step.
"""

from __future__ import annotations

import tensorflow as tf

try:  # TensorFlow marks the graphs of `tf.function(jit_compile=True)` with an XLA context.
    from tensorflow.python.ops.control_flow_util import GraphOrParentsInXlaContext
except ImportError:  # pragma: no cover - a TensorFlow without it keeps the plain paths
    GraphOrParentsInXlaContext = None


def compiled_by_xla() -> bool:
    """True while tracing a function that XLA will compile (`jit_compile=True`, TPUs).

    Some layers compute the same values two ways, one of which only pays off
    inside an XLA program (see `modeling.layers.fast_paths`).
    """
    if GraphOrParentsInXlaContext is None or tf.executing_eagerly():
        return False
    return bool(GraphOrParentsInXlaContext(tf.compat.v1.get_default_graph()))
