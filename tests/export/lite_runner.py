"""A `model.tflite`'s `serving_default` runner, in LiteRT's interpreter as the README loads it.

`ai_edge_litert` is a test requirement (requirements-dev.txt); where it is
absent, TensorFlow's own `tf.lite.Interpreter` runs the file instead, and
`RUNTIME` says so, for each test to name in its messages.
"""

from __future__ import annotations

import os
from typing import Callable

try:
    from ai_edge_litert.interpreter import Interpreter

    RUNTIME = "ai_edge_litert.interpreter.Interpreter"
except ModuleNotFoundError:  # the fallback: TensorFlow's deprecated TFLite interpreter
    import tensorflow as tf

    Interpreter = tf.lite.Interpreter
    RUNTIME = "tf.lite.Interpreter (ai_edge_litert is not installed)"


def lite_runner(path: str | os.PathLike) -> Callable[..., dict]:
    """A new interpreter's `serving_default` runner for the flat buffer at `path`.

    A new interpreter per use: a failed call leaves its error text in the
    interpreter, where the next failure's message would repeat it.
    """
    return Interpreter(model_path=os.fspath(path)).get_signature_runner("serving_default")
