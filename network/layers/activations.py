"""The feed-forward activations BERT checkpoints were trained with."""

from __future__ import annotations

from typing import Callable

import keras

from network.layers import fast_paths

_EXACT = fast_paths.xla_compiled(lambda x: keras.activations.gelu(x, approximate=False))
_APPROXIMATE = fast_paths.xla_compiled(lambda x: keras.activations.gelu(x, approximate=True))


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
