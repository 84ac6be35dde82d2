"""Bias addition, and a Dense layer that uses it, for XLA-compiled training steps."""

from __future__ import annotations

import keras
import tensorflow as tf
from keras import ops

from core.framework import compiled_by_xla


def add_bias(inputs, bias):
    """`inputs + bias` over the last axis; under XLA its bias gradient can be a product.

    A bias's gradient sums the upstream gradient over every row. XLA's CPU
    backend splits each such long sum into partial sums of 32 (a
    `reduce-window`, kept for accuracy) that ran at a fraction of memory
    speed: in the small model's compiled pre-training step these sums and
    LayerNorm's took 7% of the time. The same sum written as a product of a
    row of ones with the [rows, width] gradient goes to the matrix library,
    which reads the gradient once; the gradient is materialized anyway, as
    an operand of the kernel's two gradient products. This made that step
    about 3% faster, and a MiniLM fine-tuning step at 32 x 128 about 5%.

    Only from 4096 rows (16 KiB of float32 ones) on: below that, XLA's CPU
    backend fuses the gradient's producer into a vector-matrix product and
    computes it as a naive loop, which made a fine-tuning step 1.5x slower.
    The row count is often unknown when the step is traced, so the choice is
    a `tf.cond` on it, which XLA resolves when it compiles for the actual
    shapes. Outside XLA the product (oneDNN's) made BERT-Base's step only
    1.01x faster, within noise, so the plain sum stays; in 16-bit types a
    product's accumulation is the library's to choose, which is why those
    keep the sum too.
    """
    bias = ops.cast(bias, inputs.dtype)
    if inputs.dtype != tf.float32 or not compiled_by_xla():
        return inputs + bias
    return _add_bias_summed_by_product(inputs, bias)


# XLA's CPU backend fuses producers into vector-matrix products whose vector
# is smaller than this (`kFusionThresholdBytes` in its instruction fusion).
_UNFUSED_VECTOR_BYTES = 16 * 1024


@tf.custom_gradient
def _add_bias_summed_by_product(inputs, bias):
    def gradient(upstream):
        rows = tf.reshape(upstream, [-1, tf.shape(upstream)[-1]])
        count = tf.shape(rows)[0]
        summed = tf.cond(
            count * rows.dtype.size >= _UNFUSED_VECTOR_BYTES,
            lambda: tf.matmul(tf.ones([1, count], rows.dtype), rows)[0],
            lambda: tf.reduce_sum(rows, axis=0))
        return upstream, tf.reshape(summed, tf.shape(bias))

    return inputs + bias, gradient


@keras.saving.register_keras_serializable(package="bert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` whose bias is added by `add_bias`.

    Only the bias gradient's computation differs; weights, names, config and
    outputs are Keras's.
    """

    def call(self, inputs, training=None):
        if self.bias is None or self.quantization_mode:
            return super().call(inputs, training=training)
        outputs = add_bias(ops.matmul(inputs, self.kernel), self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
