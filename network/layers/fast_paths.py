"""Faster ways to compute what the plain Keras model computes, behind one switch.

The layers in `network/layers/` are written as the plain model. Where that
formulation was slow on a CPU, inside XLA-compiled training steps or in
TensorFlow's graph outside XLA (which serving runs, one kernel per op), they
call a function here instead, which computes the same quantity (but for
float rounding) another way; each one says which plain formulation it
replaces and why that one was slow. The encoder also computes its last
block only at the positions its callers read (`BertEncoder.call`), and an
int8-quantized model multiplies on oneDNN's int8 kernel outside XLA
(`network.layers.int8`).

The switch turns them all off, to check that a result does not depend on
them or to time what they save. It is read when a step is traced, not when
it runs (a `tf.function` traced with fast paths keeps them); it is on unless
the environment variable `BERT_FAST_PATHS` is `0` when this module is first
imported, and `disabled()` turns it off for a block of code. Off, dropout
draws its masks as Keras does: identical in float32 outside XLA, other
units under XLA and in 16-bit types, so seeded runs differ there by their
masks. What each fast path saved: `benchmarks/results/fast_paths.md`.
"""

from __future__ import annotations

import contextlib
import functools
import os
from collections.abc import Callable, Iterator

import tensorflow as tf
from keras import ops

from core.framework import compiled_by_xla

_VARIABLE = "BERT_FAST_PATHS"


def enabled_by_environment() -> bool:
    """The switch as `BERT_FAST_PATHS` sets it: 1 (or unset) on, 0 off."""
    value = os.environ.get(_VARIABLE, "1").strip()
    if value not in ("0", "1"):
        raise ValueError(f"environment variable {_VARIABLE} must be 0 or 1, got {value!r}")
    return value == "1"


_enabled = enabled_by_environment()


def enabled() -> bool:
    """Whether layers traced now take their fast paths."""
    return _enabled


@contextlib.contextmanager
def disabled() -> Iterator[None]:
    """Within this block, steps are traced as the plain Keras model (not thread-safe)."""
    global _enabled
    previous, _enabled = _enabled, False
    try:
        yield
    finally:
        _enabled = previous


_serving = False


@contextlib.contextmanager
def serving() -> Iterator[None]:
    """Within this block, graphs are traced for serving (not thread-safe).

    A served graph runs outside XLA at whatever batch size and length each
    request brings. There, `xla_compiled` functions are traced as plain ops:
    XLA would compile them anew for every input shape (0.1 s each on a CPU)
    and every call pays a launch; and bias adds are `BiasAdd`s
    (`add_bias`), which TensorFlow's oneDNN graph rewrite fuses, with the
    GELU that follows, into the product before them. For one MiniLM sequence
    of 128 tokens that is 5% less CPU time than the separately compiled GELU.
    Training keeps the compiled functions: its shapes do not change, and the
    compiled GELU's gradient is one loop too.
    """
    global _serving
    previous, _serving = _serving, True
    try:
        yield
    finally:
        _serving = previous


def xla_compiled(function: Callable) -> Callable:
    """`function`, compiled by XLA on its own when fast paths are on (not in `serving`).

    For element-wise chains such as GELU (a dozen kernels forward and more
    backward, each a pass over the network's largest activation) and the
    optimizer's update of a variable and its moments: XLA fuses each into
    one loop, even in a step that is not compiled.
    """
    compiled = tf.function(function, jit_compile=True)

    @functools.wraps(function)
    def call(*args):
        return compiled(*args) if enabled() and not _serving else function(*args)

    return call


def add_bias(inputs, bias):
    """`inputs + bias` over the last axis; under XLA, the bias gradient can be a product.

    A bias's gradient sums the upstream gradient over every row. XLA's CPU
    backend splits each such long sum into partial sums of 32 (a
    `reduce-window`, kept for accuracy) that run at a fraction of memory
    speed. The same sum written as a product of a row of ones with the
    [rows, width] gradient goes to the matrix library, which reads the
    gradient once; the gradient is materialized anyway, as an operand of the
    kernel's two gradient products.

    Only from 4096 rows (16 KiB of float32 ones) on: below that, XLA's CPU
    backend fuses the gradient's producer into a vector-matrix product and
    computes it as a naive loop, which is slower than the sum. The row count
    is often unknown when the step is traced, so the choice is a `tf.cond`
    on it, which XLA resolves when it compiles for the actual shapes.
    Outside XLA the product gained nothing measurable, so the plain sum
    stays; in 16-bit types a product's accumulation type is the library's to
    choose, which is why those keep the sum too.
    """
    bias = ops.cast(bias, inputs.dtype)
    if enabled() and _serving and not compiled_by_xla():
        return tf.nn.bias_add(inputs, bias)  # see `serving`
    if not (enabled() and inputs.dtype == tf.float32 and compiled_by_xla()):
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


def transpose(inputs, permutation: tuple[int, ...], training=None):
    """`ops.transpose(inputs, permutation)`; in inference outside XLA, as a one-operand einsum.

    TensorFlow's oneDNN build runs every `Transpose` as a oneDNN reorder,
    whose set-up costs more than moving a small tensor: 60 us for the
    [1, 128, 12, 32] heads of one sequence, where the einsum's Eigen copy
    takes 10 us (attention has four per block). From about batch 32 the two
    are equally fast, so training, at such batches, keeps the `Transpose`
    (and its gradient). The values are the same, bit for bit.
    """
    if training or not enabled() or compiled_by_xla():
        return ops.transpose(inputs, permutation)
    axes = "abcdefgh"[:len(permutation)]
    return tf.einsum(f"{axes}->{''.join(axes[axis] for axis in permutation)}", inputs)


def attend_applies(compute_dtype: str) -> bool:
    """Whether attention computes softmax, dropout and the value product by `attend`.

    Only in float32 under XLA: `attend`'s gradient takes the softmax's row
    sums from the context, so in a 16-bit type the context's rounding would
    enter the scores' gradient; outside XLA the chain of Keras ops is no
    slower.
    """
    return enabled() and compute_dtype == "float32" and compiled_by_xla()


def attend(scores: tf.Tensor, value: tf.Tensor, keep: tf.Tensor | None = None,
           scale: tf.Tensor | None = None) -> tf.Tensor:
    """`dropout(softmax(scores)) @ value`, with its gradient written out.

    `keep` and `scale` are a dropout mask and the kept units' factor (no
    dropout without them). Differentiated automatically, the softmax's
    gradient `p * (dp - sum_keys(dp * p))` reads the dropout mask again and
    takes its row sums over every key: two more passes over the
    [batch, heads, query, key] probabilities, the second a strided
    `reduce-window` on XLA's CPU backend. With `d = dropout(p)`:

    - `p * dp` is `d * dd`, so the mask is not needed;
    - `sum_keys(dp * p)` is each query's context dotted with its gradient
      (`dd = dcontext @ value^T`), a sum over the head size only.
    """

    @tf.custom_gradient
    def attend_with_context_sums(scores, value):
        probabilities = tf.nn.softmax(scores, axis=-1)
        dropped = probabilities if keep is None else tf.where(
            keep, probabilities * scale, tf.zeros_like(probabilities))
        context = tf.matmul(dropped, value)

        def gradient(context_gradient):
            dropped_gradient = tf.matmul(context_gradient, value, transpose_b=True)
            value_gradient = tf.matmul(dropped, context_gradient, transpose_a=True)
            row_sums = tf.reduce_sum(context_gradient * context, axis=-1, keepdims=True)
            return dropped * dropped_gradient - probabilities * row_sums, value_gradient

        return context, gradient

    return attend_with_context_sums(scores, value)


def dropout_keep_mask(shape: tf.Tensor, rate: float, seed: tf.Tensor,
                      dtype: tf.DType) -> tuple[tf.Tensor, tf.Tensor]:
    """The units dropout keeps in a tensor of `shape` and `dtype`, and their scale.

    Plain, as `keras.layers.Dropout`: a uniform draw per unit, in `dtype`,
    from TensorFlow's default stateless generator; units whose draw is at
    least `rate` are kept and scaled by 1 / (1 - rate). With fast paths:

    - Draws are float32 whatever `dtype` (the same draws as Keras's in
      float32). In bfloat16 they were slower on CPU than float32 ones and
      only 8 bits fine, which held the rate to about 1%.
    - Under XLA, TensorFlow's default generator expands into code that made
      dropout a large share of a small model's forward pass; ThreeFry, which
      XLA implements natively, replaces it (TensorFlow has no ThreeFry kernel
      outside XLA). Each unit is decided by 16 of its bits, not 32, so every
      32-bit draw serves two units, which halves ThreeFry's work. The rate is
      then held to 1/65536 (0.1 becomes 0.100006), and kept units are scaled
      by the inverse of the keep probability actually drawn, so the expected
      output still equals the input.

    `seed` is an int32 pair; the same seed gives the same mask.
    """
    if enabled() and compiled_by_xla():
        return _sixteen_bit_keep_mask(shape, rate, seed, dtype)
    draws = tf.random.stateless_uniform(shape, seed, dtype=tf.float32 if enabled() else dtype,
                                        alg="auto_select")
    return draws >= rate, tf.constant(1.0 / (1.0 - rate), dtype)


_LEVELS = 1 << 16  # the values 16 random bits take


def _sixteen_bit_keep_mask(shape, rate, seed, dtype):
    size = tf.reduce_prod(shape)
    words = tf.random.stateless_uniform(
        [(size + 1) // 2], seed, minval=None, maxval=None, dtype=tf.uint32, alg="threefry")
    halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
    dropped_levels = min(max(round(rate * _LEVELS), 1), _LEVELS - 1)
    scale = tf.constant(_LEVELS / (_LEVELS - dropped_levels), dtype)
    return tf.reshape(halves >= dropped_levels, shape), scale


def cross_entropy(labels, logits):
    """Per-example softmax cross-entropy: `sparse_categorical_crossentropy` from logits.

    Where XLA lowers TensorFlow's fused op, it takes the loss as a sum over a
    one-hot of the whole vocabulary, one more pass over the
    [predictions, vocab] logits than picking each label's logit; so the fast
    path is `logsumexp(logits) - logits[label]`, which was faster for the
    masked-LM loss with XLA and without.
    """
    labels = ops.cast(labels, "int32")
    if not enabled():
        return ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    picked = tf.gather(logits, labels, batch_dims=len(labels.shape))
    return ops.logsumexp(logits, axis=-1) - picked
