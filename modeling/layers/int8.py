"""Int8 products for inference, in Keras' int8 scheme, and the fast way to compute them on CPU.

The scheme is the one `keras.layers.Dense.quantize("int8")` uses, so a
quantized layer here computes what Keras' own int8 `Dense` would: each
kernel column (output channel) is scaled to [-127, 127] by its absolute
maximum and rounded to int8 once (`quantize_kernel`); at every call, each
row of the inputs is scaled and rounded the same way (`quantize_rows`); the
int32 product of the two is divided by both scales.

Two ways compute the same int32 product:

- plain: `tf.matmul(int8, int8, output_type=int32)`, what Keras runs. XLA
  turns it into a fast int8 dot; outside XLA, TensorFlow's CPU kernel for
  it is a generic loop, several times slower than the float32 product.
- fast (a fast path of `modeling.layers.fast_paths`, outside XLA only):
  oneDNN's `QuantizedMatMulWithBias`, which runs on the CPU's int8
  instructions (VNNI where present). It takes unsigned activations, so the
  rows enter as `q + 128` and `128 * column sum` is subtracted from the
  result, which restores the plain product exactly; the column sums are
  kept with the kernel (`column_sums`). The quantization of the rows and
  the rescaling of the result are each compiled by XLA into one pass.

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
from modeling.layers import fast_paths

MODE = "int8"
_RANGE = 127.0  # int8 values used: [-127, 127], symmetric, as Keras
_SHIFT = 128  # q + 128 turns an int8 row value into the uint8 oneDNN takes
_EPSILON = keras.config.epsilon()  # Keras' guard against an all-zero row


class Quantizable:
    """Marks a layer whose `quantize("int8")` gives it an int8 call from this module.

    `modeling.quantization` quantizes these and passes over every other layer.
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


def quantize_kernel(kernel: np.ndarray, input_axis: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """int8 kernel, float32 scale per output and int32 column sums of a float kernel.

    `input_axis` is the axis summed over in the product (0 for a Dense
    [inputs, outputs] kernel).
    """
    quantized, scale = keras.quantizers.abs_max_quantize(
        kernel, axis=input_axis, value_range=(-_RANGE, _RANGE), dtype="int8", to_numpy=True)
    quantized = ops.convert_to_numpy(quantized)
    scale = np.squeeze(ops.convert_to_numpy(scale), axis=input_axis).astype("float32")
    return quantized, scale, column_sums(quantized, input_axis)


def column_sums(quantized: np.ndarray, input_axis: int) -> np.ndarray:
    """Sums of an int8 kernel over its inputs, in int32 (exact up to 2**24 inputs)."""
    return np.sum(quantized.astype("int32"), axis=input_axis, dtype="int32")


class QuantizedRows(NamedTuple):
    """Inputs [..., features] as int8 rows (uint8, shifted by 128, on the fast path)."""
    values: tf.Tensor  # [rows, features]
    scale: tf.Tensor  # [rows, 1] float32
    leading_shape: tf.Tensor  # the inputs' shape without the last axis
    shifted: bool


def quantize_rows(inputs) -> QuantizedRows:
    """Each row of `inputs` scaled by 127 / (max |row| + epsilon) and rounded, as Keras.

    Quantize once and multiply by several kernels (attention's query, key and
    value share their inputs).
    """
    inputs = tf.convert_to_tensor(inputs)
    leading_shape = tf.shape(inputs)[:-1]
    rows = tf.reshape(tf.cast(inputs, tf.float32), [-1, inputs.shape[-1]])
    fast = _use_onednn()
    values, scale = (_rows_for_onednn if fast else _rows)(rows)
    return QuantizedRows(values, scale, leading_shape, fast)


def _rows(rows):
    scale = _RANGE / (tf.reduce_max(tf.abs(rows), axis=-1, keepdims=True) + _EPSILON)
    values = tf.clip_by_value(tf.round(rows * scale), -_RANGE, _RANGE)
    return tf.cast(values, tf.int8), scale


@fast_paths.xla_compiled
def _rows_for_onednn(rows):
    values, scale = _rows(rows)
    return tf.cast(tf.cast(values, tf.int32) + _SHIFT, tf.uint8), scale


def product(rows: QuantizedRows, kernel: Int8Kernel, bias=None, dtype="float32"):
    """`rows` times the float kernel `kernel` stands for, plus `bias`: [..., outputs] in `dtype`."""
    # Under a mixed policy Keras hands a layer its float32 variables in the compute
    # dtype (as it does to Keras' own int8 Dense); the rescaling is float32 anyway.
    kernel_scale = tf.cast(tf.convert_to_tensor(kernel.scale), tf.float32)
    bias = tf.zeros_like(kernel_scale) if bias is None else tf.cast(bias, tf.float32)
    if rows.shifted:
        accumulated = _onednn_product(rows.values, kernel)
        outputs = _rescale_shifted(accumulated, rows.scale, kernel_scale,
                                   tf.convert_to_tensor(kernel.column_sums), bias)
    else:
        accumulated = tf.matmul(rows.values, kernel.kernel, transpose_b=kernel.transposed,
                                output_type=tf.int32)
        outputs = _rescale(accumulated, rows.scale, kernel_scale, bias)
    outputs = tf.reshape(outputs, tf.concat([rows.leading_shape, tf.shape(kernel.scale)], 0))
    return tf.cast(outputs, dtype)


def _rescale(accumulated, row_scale, kernel_scale, bias):
    # Keras' order: the int32 product divided by the product of the two scales.
    return tf.cast(accumulated, tf.float32) / (kernel_scale * row_scale) + bias


@fast_paths.xla_compiled
def _rescale_shifted(accumulated, row_scale, kernel_scale, sums, bias):
    return _rescale(accumulated - _SHIFT * sums, row_scale, kernel_scale, bias)


def _onednn_product(shifted_rows, kernel: Int8Kernel):
    """uint8 [rows, inputs] times the int8 kernel: int32 [rows, outputs], by oneDNN."""
    weights = tf.transpose(kernel.kernel) if kernel.transposed else kernel.kernel
    product = tf.raw_ops.QuantizedMatMulWithBias(
        a=tf.bitcast(shifted_rows, tf.quint8), b=tf.bitcast(weights, tf.qint8),
        bias=tf.zeros(tf.shape(weights)[1:], tf.float32),
        # With these ranges oneDNN's scales are 1: the output is the integer product.
        min_a=0.0, max_a=255.0, min_b=-_RANGE, max_b=_RANGE,
        Toutput=tf.qint32, input_quant_mode="SCALED")[0]
    return tf.bitcast(product, tf.int32)


def dequantized(kernel: Int8Kernel):
    """The float kernel `kernel` approximates, [inputs, outputs] (for gradients and checks)."""
    weights = tf.transpose(kernel.kernel) if kernel.transposed else kernel.kernel
    return tf.cast(weights, tf.float32) / kernel.scale


def _use_onednn() -> bool:
    return fast_paths.enabled() and not compiled_by_xla() and onednn_available()


@functools.cache
def onednn_available() -> bool:
    """Whether oneDNN's int8 product runs here and gives a known product exactly (checked once)."""
    generator = np.random.default_rng(0)
    rows = generator.integers(0, 256, (3, 70)).astype("uint8")
    kernel = generator.integers(-127, 128, (70, 5)).astype("int8")
    expected = rows.astype("int64") @ kernel.astype("int64")
    with tf.init_scope():
        try:
            got = _onednn_product(tf.constant(rows), Int8Kernel(
                tf.constant(kernel), tf.ones([5]), tf.zeros([5], tf.int32))).numpy()
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

    They become the non-trainable weights `<name>`, `<name>_scale` and
    `<name>_column_sums`, added in that order (a saved layer's weights are
    read back by position). Call it where Keras lets a built layer add
    weights: in `quantize` or `build`. A layer rebuilt from a quantized
    layer's config calls it on its fresh weights; loading then overwrites
    all three.
    """
    for name in names:
        quantized, scale, sums = quantize_kernel(getattr(layer, name).numpy(), input_axis)
        delattr(layer, name)
        for suffix, value in (("", quantized), ("_scale", scale), ("_column_sums", sums)):
            # Not autocast: a mixed policy would otherwise round the scales to 16 bits.
            weight = layer.add_weight(name=name + suffix, shape=value.shape,
                                      dtype=value.dtype.name, initializer="zeros",
                                      trainable=False, autocast=False)
            weight.assign(value)
            setattr(layer, name + suffix, weight)


def quantized_weight(layer: keras.layers.Layer, name: str, transposed: bool = False) -> Int8Kernel:
    """The `Int8Kernel` that `quantize_weight(layer, name, ...)` left."""
    return Int8Kernel(getattr(layer, name), getattr(layer, f"{name}_scale"),
                      getattr(layer, f"{name}_column_sums"), transposed)


def check_inference(layer: keras.layers.Layer, training) -> None:
    """Refuses `training=True`: no gradient flows through the int8 products."""
    if training is True:
        raise ValueError(f"{layer.name} holds {MODE} weights, which serve inference only, but "
                         "was called with training=True; train the float model, then quantize")
