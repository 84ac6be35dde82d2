"""Plain numpy re-computations of the paper's layer formulas, and the small inputs they run on.

Shared by the layer tests and the fast-path tests, which compare the same layers.
"""

import math

import keras
import numpy as np

from network.layers.attention import MASK_BIAS

B, S, H, HEADS, FFN = 2, 7, 16, 2, 24
RNG = np.random.default_rng(1)


def reset_rng() -> None:
    """Restart RNG, so that each test draws the same inputs whatever ran before it."""
    RNG.bit_generator.state = np.random.default_rng(1).bit_generator.state


def erf(x):
    return np.vectorize(math.erf)(x)


def layer_norm(x, gamma, beta, eps=1e-12):
    mean = x.mean(-1, keepdims=True)
    variance = ((x - mean) ** 2).mean(-1, keepdims=True)
    return (x - mean) / np.sqrt(variance + eps) * gamma + beta


def softmax(x):
    e = np.exp(x - x.max(-1, keepdims=True))
    return e / e.sum(-1, keepdims=True)


def reference_attention(layer, x, mask):
    """Three separate projections, as the paper writes them."""
    w = {name: keras.ops.convert_to_numpy(getattr(layer, name)) for name in (
        "query_kernel", "query_bias", "key_kernel", "key_bias", "value_kernel", "value_bias",
        "output_kernel", "output_bias")}
    size = H // HEADS

    def heads(t):
        return t.reshape(B, S, HEADS, size).transpose(0, 2, 1, 3)
    q = heads(x @ w["query_kernel"] + w["query_bias"])
    k = heads(x @ w["key_kernel"] + w["key_bias"])
    v = heads(x @ w["value_kernel"] + w["value_bias"])
    scores = q @ k.transpose(0, 1, 3, 2) / math.sqrt(size)
    scores = scores + (1.0 - mask[:, None, None, :]) * MASK_BIAS
    probs = softmax(scores)
    context = (probs @ v).transpose(0, 2, 1, 3).reshape(B, S, H)
    return context @ w["output_kernel"] + w["output_bias"], probs


def random_weights(layer):
    """Replace initial zeros/ones so biases and LayerNorm parameters are exercised."""
    for variable in layer.weights:
        variable.assign(RNG.normal(0, 0.3, variable.shape).astype("float32"))


def padded_mask():
    mask = np.ones((B, S), "float32")
    mask[1, 4:] = 0
    return mask
