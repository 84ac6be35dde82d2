"""Int8 products for inference, in Keras' int8 scheme, and the fast way to compute them on CPU.

The scheme is the one `keras.layers.Dense.quantize("int8")` uses, so a
quantized layer here computes what Keras' own int8 `Dense` would: each
kernel column (output channel) is scaled to [-127, 127] by its absolute
maximum and rounded to int8 once (`quantize_kernel`); at every call, each
row of the inputs is scaled and rounded the same way (`quantize_rows`); the
int32 product of the two is divided by both scales.

Two ways compute the same int32 product:

- plain: `tf.matmul(int8, int8, output_type=int32)`, what Keras runs. XLA
  turns it into an int8 dot; outside XLA, TensorFlow's CPU kernel for it is
  a generic loop, several times slower than the float32 product.
- fast (a fast path of `network.layers.fast_paths`, outside XLA only):
  oneDNN's `QuantizedMatMulWithBias`, which runs on the CPU's int8
  instructions (VNNI where present). It takes unsigned activations, so the
  rows enter as `q + 128` and `128 * column sum` is subtracted from the
  result, which restores the plain product exactly; the column sums are
  kept beside the kernel. The quantization of the rows and the rescaling of
  the result are each compiled by XLA into one pass, which also applies the
  activation and splits attention heads. oneDNN rearranges the kernel on
  every call, which with few rows (one sequence of 128 tokens) costs about
  as much as the product, so the fast path pays off from a few sequences
  per call on.

TensorFlow registers the oneDNN kernel only when oneDNN is on (the default
on x86-64 Linux); without it the op returns nothing. So the fast path is
taken only after a one-time check that it computes a known product exactly
(`onednn_available`), and a graph traced with it (a SavedModel, too) needs
oneDNN wherever it runs; trace under `fast_paths.disabled()` for a graph
without it. Figures: benchmarks/results/int8_speed.md.
"""

from __future__ import annotations

import functools
from typing import NamedTuple

import keras
import numpy as np
import tensorflow as tf
from keras import ops

from core.framework import compiled_by_xla, mark_quantized
from network.layers import fast_paths

MODE = "int8"
_RANGE = 127.0  # int8 values used: [-127, 127], symmetric, as Keras
_SHIFT = 128  # q + 128 turns an int8 row value into the uint8 oneDNN takes
_EPSILON = keras.config.epsilon()  # Keras' guard against an all-zero row
# The weights of each int8 kernel, by the suffix of their names.
SUFFIXES = ("", "_scale", "_column_sums")


class Quantizable:
    """Marks a layer whose `quantize("int8")` gives it an int8 call from this module.

    `network.quantization` quantizes these and passes over every other layer.
    """


class Int8Kernel(NamedTuple):
    """A quantized kernel [inputs, outputs] (or [outputs, inputs] if `transposed`).

    `scale` [outputs] multiplies the float kernel into `kernel`'s range;
    `column_sums` [outputs] are the int32 sums of `kernel` over its inputs.
    """
    kernel: tf.Tensor
    scale: tf.Tensor
    column_sums: tf.Tensor
    transposed: bool = False


def check_request(layer: keras.layers.Layer, mode: str, config) -> None:
    """Refuses what this scheme cannot honour: another mode, custom quantizers, a second time.

    Keras' own checks run first (a mode Keras knows, a built layer); these
    are the ones that are particular to this package.
    """
    if mode != MODE:
        raise ValueError(f"{layer.name}: quantization mode {mode!r} is not supported here; "
                         f"mode must be {MODE!r}")
    if config is not None and (config.weight_quantizer is not None
                               or not _is_default_rows_quantizer(config.activation_quantizer)):
        raise ValueError(f"{layer.name}: config {config!r} sets its own quantizers; only the "
                         "default int8 scheme (per output channel for weights, per row for "
                         "activations) is supported here, so pass config=None")
    if layer.quantization_mode is not None:
        raise ValueError(f"{layer.name} is already quantized ({layer.quantization_mode}); "
                         "quantize a float copy of the model instead")


def _is_default_rows_quantizer(quantizer) -> bool:
    if quantizer is None:
        return False
    default = keras.quantizers.AbsMaxQuantizer()
    return (type(quantizer) is type(default)
            and quantizer.get_config() == default.get_config()
            and quantizer.axis in (None, (-1,)))


def quantize_kernel(kernel: np.ndarray, input_axis: int) -> dict[str, np.ndarray]:
    """A float kernel's int8 values (as Keras quantizes them), scales and column sums.

    By `SUFFIXES`; `input_axis` is the axis summed over in the product (0
    for a Dense [inputs, outputs] kernel).
    """
    quantized, scale = keras.quantizers.abs_max_quantize(
        kernel, axis=input_axis, value_range=(-_RANGE, _RANGE), dtype="int8", to_numpy=True)
    quantized = ops.convert_to_numpy(quantized)
    scale = np.squeeze(ops.convert_to_numpy(scale), axis=input_axis).astype("float32")
    return {"": quantized, "_scale": scale, "_column_sums": column_sums(quantized, input_axis)}


def column_sums(quantized: np.ndarray, input_axis: int) -> np.ndarray:
    """Sums of an int8 kernel over its inputs, in int32 (exact up to 2**24 inputs)."""
    return np.sum(quantized.astype("int32"), axis=input_axis, dtype="int32")


class QuantizedRows(NamedTuple):
    """Inputs [..., features] as int8 rows [rows, features] (uint8, shifted by 128, on the fast
    path)."""
    values: tf.Tensor
    scale: tf.Tensor  # [rows, 1] float32
    leading_shape: tf.Tensor  # the inputs' shape without the last axis
    shifted: bool


def quantize_rows(inputs, from_heads: bool = False) -> QuantizedRows:
    """Each row of `inputs` scaled by 127 / (max |row| + epsilon) and rounded, as Keras.

    Quantize once and multiply by several kernels (attention's query, key and
    value share their inputs). With `from_heads`, `inputs` are
    [batch, heads, rows, size] and a row is its heads side by side (the
    attention context, rearranged in the same pass).
    """
    inputs = tf.convert_to_tensor(inputs)
    shape = tf.shape(inputs)
    leading_shape = tf.stack([shape[0], shape[2]]) if from_heads else shape[:-1]
    fast = _use_onednn()
    values, scale = (_rows_for_onednn if fast else _rows)(inputs, from_heads)
    return QuantizedRows(values, scale, leading_shape, fast)


def _rows(inputs, from_heads):
    if from_heads:
        inputs = tf.transpose(inputs, (0, 2, 1, 3))
        inputs = tf.reshape(inputs, [-1, inputs.shape[-2] * inputs.shape[-1]])
    rows = tf.reshape(tf.cast(inputs, tf.float32), [-1, inputs.shape[-1]])
    scale = _RANGE / (tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) + _EPSILON)
    values = tf.clip_by_value(tf.round(rows * scale), -_RANGE, _RANGE)
    return tf.cast(values, tf.int8), scale


@fast_paths.xla_compiled
@tf.autograph.experimental.do_not_convert  # plain Python: nothing for autograph to convert
def _rows_for_onednn(inputs, from_heads):
    values, scale = _rows(inputs, from_heads)
    return tf.cast(tf.cast(values, tf.int32) + _SHIFT, tf.uint8), scale


def product(rows: QuantizedRows, kernel: Int8Kernel, bias=None, dtype="float32",
            activation=None, heads: tuple | None = None):
    """`rows` times the float kernel `kernel` stands for, plus `bias`: [..., outputs] in `dtype`.

    `activation` (a function, the same object on every call) is applied to
    the result; `heads = (count, order)` splits its last axis into `count`
    heads and transposes the result to `order` (attention's layout). On the
    fast path both happen in the rescaling's single pass.
    """
    # Under a mixed policy Keras hands a layer its float32 variables in the compute
    # dtype (as it does to Keras' own int8 Dense); the rescaling is float32 anyway.
    kernel_scale = tf.cast(tf.convert_to_tensor(kernel.scale), tf.float32)
    bias = tf.zeros_like(kernel_scale) if bias is None else tf.cast(bias, tf.float32)
    weights = tf.transpose(kernel.kernel) if kernel.transposed else kernel.kernel
    if rows.shifted:
        accumulated = _onednn_product(rows.values, weights)
        outputs = _rescale_shifted(accumulated, rows.scale, kernel_scale,
                                   tf.convert_to_tensor(kernel.column_sums), bias,
                                   rows.leading_shape, activation, heads)
    else:
        accumulated = tf.matmul(rows.values, weights, output_type=tf.int32)
        outputs = _finish(_rescale(accumulated, rows.scale, kernel_scale, bias),
                          rows.leading_shape, activation, heads)
    return tf.cast(outputs, dtype)


def _rescale(accumulated, row_scale, kernel_scale, bias):
    # Keras' order: the int32 product divided by the product of the two scales.
    return tf.cast(accumulated, tf.float32) / (kernel_scale * row_scale) + bias


def _finish(outputs, leading_shape, activation, heads):
    """[rows, outputs] -> [..., outputs] after `activation`, or split into `heads`."""
    if activation is not None:
        outputs = activation(outputs)
    if heads is None:
        return tf.reshape(outputs, tf.concat([leading_shape, tf.shape(outputs)[-1:]], 0))
    count, order = heads
    size = outputs.shape[-1] // count  # static: the kernel's width is
    outputs = tf.reshape(outputs, tf.concat([leading_shape, [count, size]], 0))
    return tf.transpose(outputs, order)


@fast_paths.xla_compiled
@tf.autograph.experimental.do_not_convert
def _rescale_shifted(accumulated, row_scale, kernel_scale, sums, bias, leading_shape,
                     activation, heads):
    return _finish(_rescale(accumulated - _SHIFT * sums, row_scale, kernel_scale, bias),
                   leading_shape, activation, heads)


def _onednn_product(unsigned, signed):
    """uint8 [m, k] times int8 [k, n]: int32 [m, n], by oneDNN."""
    product = tf.raw_ops.QuantizedMatMulWithBias(
        a=tf.bitcast(unsigned, tf.quint8), b=tf.bitcast(signed, tf.qint8),
        bias=tf.zeros(tf.shape(signed)[1:], tf.float32),
        # With these ranges oneDNN's scales are 1: the output is the integer product.
        min_a=0.0, max_a=255.0, min_b=-_RANGE, max_b=_RANGE,
        Toutput=tf.qint32, input_quant_mode="SCALED")[0]
    return tf.bitcast(product, tf.int32)


def _use_onednn() -> bool:
    return fast_paths.enabled() and not compiled_by_xla() and onednn_available()


@functools.cache
def onednn_available() -> bool:
    """Whether oneDNN's int8 product runs here and gives a known product exactly (checked once)."""
    generator = np.random.default_rng(0)
    unsigned = generator.integers(0, 256, (3, 70)).astype("uint8")
    signed = generator.integers(-127, 128, (70, 5)).astype("int8")
    expected = unsigned.astype("int64") @ signed.astype("int64")
    with tf.init_scope():
        try:
            got = _onednn_product(tf.constant(unsigned), tf.constant(signed)).numpy()
        except (tf.errors.OpError, ValueError):
            return False
    return got.shape == expected.shape and bool(np.array_equal(got, expected))


def quantize_layer(layer: keras.layers.Layer, mode: str, config, names: tuple[str, ...],
                   input_axis: int) -> None:
    """A layer's `quantize`: checks the request, quantizes the kernels `names`, marks the layer."""
    check_request(layer, mode, config)
    quantize_weights(layer, names, input_axis)
    mark_quantized(layer, mode)


def quantize_weights(layer: keras.layers.Layer, names: tuple[str, ...], input_axis: int) -> None:
    """Replaces each float kernel `layer.<name>` by its int8 values, scales and column sums.

    They become the non-trainable weights `<name><suffix>` for each of
    `SUFFIXES`, added in that order (a saved layer's weights are read back
    by position). Call it where Keras lets a built layer add weights: in
    `quantize` or `build`. A layer rebuilt from a quantized layer's config
    calls it on its fresh weights; loading then overwrites them all.
    """
    for name in names:
        values = quantize_kernel(getattr(layer, name).numpy(), input_axis)
        delattr(layer, name)
        for suffix in SUFFIXES:
            value = values[suffix]
            # Not autocast: a mixed policy would otherwise round the scales to 16 bits.
            weight = layer.add_weight(name=name + suffix, shape=value.shape,
                                      dtype=value.dtype.name, initializer="zeros",
                                      trainable=False, autocast=False)
            weight.assign(value)
            setattr(layer, name + suffix, weight)


def quantized_weight(layer: keras.layers.Layer, name: str, transposed: bool = False) -> Int8Kernel:
    """The `Int8Kernel` that `quantize_weights` left for `layer.<name>`."""
    return Int8Kernel(*(getattr(layer, name + suffix) for suffix in SUFFIXES), transposed)


def check_inference(layer: keras.layers.Layer, training) -> None:
    """Refuses `training=True`: no gradient flows through the int8 products."""
    if training is True:
        raise ValueError(f"{layer.name} holds {MODE} weights, which serve inference only, but "
                         "was called with training=True; train the float model, then quantize")
