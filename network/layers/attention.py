"""Multi-head scaled dot-product self-attention with BERT's weight layout."""

from __future__ import annotations

import math

import keras
import tensorflow as tf
from keras import ops

from network.layers import fast_paths, int8
from network.layers.dropout import Dropout
from network.layers.settings import ConfigurableLayer

# Added to the scores of masked keys (the original's value): the scores are
# float32 here under every policy, where exp(-10000) underflows to exactly zero,
# and a row with every key masked still gives finite probabilities.
MASK_BIAS = -10000.0

_KERNELS = ("query_kernel", "key_kernel", "value_kernel", "output_kernel")


def attention_bias(input_mask, causal: bool = False):
    """Additive float32 bias [batch, 1, query, key] from a [batch, key] padding mask.

    With `causal=True` a query may also not look at later positions, which
    turns the encoder into the left-to-right (GPT-style) model of the paper's
    ablations.
    """
    allowed = ops.expand_dims(ops.cast(input_mask, "float32"), (1, 2))
    if causal:
        length = ops.shape(input_mask)[1]
        positions = ops.arange(length)
        lower = ops.cast(positions[:, None] >= positions[None, :], "float32")
        allowed = allowed * lower[None, None, :, :]
    return (1.0 - allowed) * MASK_BIAS


@keras.saving.register_keras_serializable(package="bert")
class SelfAttention(int8.Quantizable, ConfigurableLayer):
    """Self-attention followed by its output projection.

    Query, key and value kernels are three [hidden, hidden] weights, exactly
    as in Google's checkpoints, and are multiplied in separately: one
    concatenated [hidden, 3 * hidden] product would have to be concatenated
    on every call and sliced apart again, and the gradient of each slice is a
    full-size tensor padded with zeros. Each projection goes straight into
    the [batch, heads, ...] layout its batched product wants (the key
    pre-transposed), so the products need no further copies.

    The softmax, its dropout and the product with the values are Keras ops,
    or `fast_paths.attend` where that applies (`fast_paths.attend_applies`).

    `quantize("int8")` turns the four kernels into int8 ones (`int8`); the
    query, key and value products then share one quantization of their
    inputs.
    """

    def __init__(self, hidden_size: int, num_heads: int, initializer_range: float = 0.02,
                 dropout_rate: float = 0.1, **kwargs):
        super().__init__(**kwargs)
        if hidden_size % num_heads:
            raise ValueError(f"hidden_size {hidden_size} is not divisible by {num_heads} heads")
        self.keep_settings(hidden_size=hidden_size, num_heads=num_heads,
                           initializer_range=initializer_range, dropout_rate=dropout_rate)
        self.head_size = hidden_size // num_heads
        self.dropout = Dropout(dropout_rate, dtype=self.dtype_policy)

    def build(self, input_shape=None):
        initializer = keras.initializers.TruncatedNormal(stddev=self.initializer_range)
        size = self.hidden_size
        for name in ("query", "key", "value", "output"):
            setattr(self, f"{name}_kernel", self.add_weight(
                shape=(size, size), initializer=initializer, name=f"{name}_kernel"))
            setattr(self, f"{name}_bias", self.add_weight(
                shape=(size,), initializer="zeros", name=f"{name}_bias"))
        if self.quantization_mode == int8.MODE:  # rebuilt from a quantized layer's config
            int8.quantize_weights(self, _KERNELS, input_axis=0)
        self.built = True

    def quantize(self, mode=None, type_check=True, config=None):
        int8.quantize_layer(self, mode, config, _KERNELS, input_axis=0)

    def quantized_call(self, hidden_states, bias, training=None, **kwargs):
        int8.check_inference(self, training)
        return self.call(hidden_states, bias, training=training, **kwargs)

    def _project(self, inputs, name: str, order: tuple | None = None):
        """`inputs` [rows, hidden] times a kernel, plus its bias.

        In float the inputs are 2-D rows, whose product TensorFlow's oneDNN
        rewrite fuses with the bias add. Quantized (`inputs` are
        `int8.QuantizedRows`), `order` splits the result into heads in that
        order, in the rescaling's pass.
        """
        kernel_bias = getattr(self, f"{name}_bias")
        if isinstance(inputs, int8.QuantizedRows):
            kernel = int8.quantized_weight(self, f"{name}_kernel")
            return int8.product(inputs, kernel, kernel_bias, self.compute_dtype,
                                heads=None if order is None else (self.num_heads, order))
        return fast_paths.add_bias(ops.matmul(inputs, getattr(self, f"{name}_kernel")),
                                   kernel_bias)

    def call(self, hidden_states, bias, training=None, return_probabilities=False,
             output_positions=None):
        """Attention output [batch, query, hidden]; `output_positions` [batch, n] picks the queries.

        Without `output_positions` every position is a query. With them, only
        those positions are (all are still keys and values): the output is
        [batch, n, hidden], as those rows of the full output, with the
        probabilities' dropout mask that a call for every query draws.
        """
        batch, length = ops.shape(hidden_states)[0], ops.shape(hidden_states)[1]
        queries_from = hidden_states
        if output_positions is not None:
            queries_from = tf.gather(hidden_states, output_positions, axis=1, batch_dims=1)
            if bias.shape[2] != 1:  # a causal bias has a row per query
                bias = tf.gather(bias, output_positions, axis=2, batch_dims=1)
        query_length = ops.shape(queries_from)[1]
        keys_from = hidden_states
        if self.quantization_mode:
            keys_from = int8.quantize_rows(hidden_states)
            queries_from = (keys_from if output_positions is None
                            else int8.quantize_rows(queries_from))

        def heads(inputs, rows, name, order):
            if self.quantization_mode:
                return self._project(inputs, name, order)
            projected = self._project(ops.reshape(inputs, (-1, self.hidden_size)), name)
            return fast_paths.transpose(
                ops.reshape(projected, (batch, rows, self.num_heads, self.head_size)), order,
                training)

        query = heads(queries_from, query_length, "query", (0, 2, 1, 3))  # [b, heads, q, size]
        key = heads(keys_from, length, "key", (0, 2, 3, 1))  # [b, heads, size, k]
        value = heads(keys_from, length, "value", (0, 2, 1, 3))  # [b, heads, k, size]
        # Scaling the query before the product keeps float16 scores in range.
        query = query * ops.cast(1.0 / math.sqrt(self.head_size), query.dtype)
        scores = ops.matmul(query, key)  # [batch, heads, query, key]
        scores = ops.cast(scores, "float32") + ops.cast(bias, "float32")
        every_query = tf.stack([batch, self.num_heads, length, length])
        if return_probabilities or not fast_paths.attend_applies(self.compute_dtype):
            probabilities = ops.softmax(scores, axis=-1)
            dropped = self.dropout(ops.cast(probabilities, self.compute_dtype), training=training,
                                   output_positions=output_positions, full_shape=every_query,
                                   axis=2)
            context = ops.matmul(dropped, value)
        else:  # the same three steps, with a gradient written for XLA
            keep, scale = (self.dropout.keep_mask(every_query, scores.dtype, output_positions,
                                                  axis=2)
                           if self.dropout.drops(training) else (None, None))
            context = fast_paths.attend(scores, value, keep, scale)
        if self.quantization_mode:  # rearranged as it is quantized
            output = self._project(int8.quantize_rows(context, from_heads=True), "output")
        else:
            context = fast_paths.transpose(context, (0, 2, 1, 3), training)  # [b, q, heads, size]
            output = self._project(ops.reshape(context, (-1, self.hidden_size)), "output")
            output = ops.reshape(output, (batch, query_length, self.hidden_size))
        if return_probabilities:
            return output, probabilities
        return output
