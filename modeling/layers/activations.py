"""The feed-forward activations BERT checkpoints were trained with."""

from __future__ import annotations

from typing import Callable

import keras
import tensorflow as tf


# GELU is a dozen element-wise kernels forward and more backward, each a pass
# over the largest activation of the network ([batch, seq, intermediate]);
# compiled with XLA they are one fused loop each way.
_EXACT = tf.function(lambda x: keras.activations.gelu(x, approximate=False), jit_compile=True)
_APPROXIMATE = tf.function(lambda x: keras.activations.gelu(x, approximate=True),
                           jit_compile=True)


def gelu(x):
    """Exact GELU, x * Phi(x) with the normal CDF through erf: the paper's and
    Hugging Face's `gelu`."""
    return _EXACT(x)


def gelu_approximate(x):
    """The tanh approximation of GELU, which the original TensorFlow code computed."""
    return _APPROXIMATE(x)


_BY_NAME = {"gelu": gelu, "gelu_approximate": gelu_approximate,
            "relu": keras.activations.relu}


def get_activation(name: str) -> Callable:
    try:
        return _BY_NAME[name]
    except KeyError:
        raise ValueError(f"unknown activation {name!r}; expected one of "
                         f"{', '.join(_BY_NAME)}") from None
