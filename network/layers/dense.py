"""The Dense layer of BERT's projections, feed-forward and heads."""

from __future__ import annotations

import warnings

import keras
from keras import ops

from network.layers import fast_paths, int8

# What the fast path keeps beside Keras' int8 kernel and its scale.
_COLUMN_SUMS = "kernel_column_sums"


@keras.saving.register_keras_serializable(package="bert")
class Dense(int8.Quantizable, keras.layers.Dense):
    """`keras.layers.Dense` whose bias is added by `fast_paths.add_bias`, and which quantizes.

    Only the bias gradient's computation under XLA differs; weights, names,
    config and outputs are Keras's. `quantize("int8")` is Keras' int8
    quantization (Keras refuses it to subclasses unless asked), plus the
    kernel's column sums the fast path needs, and the int8 call computes
    Keras' int8 product by `int8.product` (oneDNN's int8 kernel where it runs).
    """

    def call(self, inputs, training=None):
        if self.bias is None or self.quantization_mode:
            return super().call(inputs, training=training)
        outputs = fast_paths.add_bias(ops.matmul(inputs, self.kernel), self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs

    def quantize(self, mode=None, type_check=True, config=None):
        int8.check_request(self, mode, config)
        with warnings.catch_warnings():
            # Keras reads the kernel with np.array(variable), which numpy 2 deprecates.
            warnings.filterwarnings("ignore", "__array__ implementation doesn't accept a copy",
                                    DeprecationWarning)
            super().quantize(mode, type_check=False, config=config)
        getattr(self, _COLUMN_SUMS).assign(int8.column_sums(self.kernel.numpy(), input_axis=0))

    def quantized_build(self, kernel_shape, mode, config=None):
        super().quantized_build(kernel_shape, mode, config)
        if mode == int8.MODE:
            setattr(self, _COLUMN_SUMS, self.add_weight(
                name=_COLUMN_SUMS, shape=(self.units,), dtype="int32", initializer="zeros",
                trainable=False))

    @property
    def variable_serialization_spec(self):
        spec = dict(super().variable_serialization_spec)
        spec[int8.MODE] = [*spec[int8.MODE], _COLUMN_SUMS]
        return spec

    def quantized_call(self, inputs, training=None):
        if self.quantization_mode != int8.MODE:
            return super().quantized_call(inputs, training=training)
        int8.check_inference(self, training)
        kernel = int8.Int8Kernel(self.kernel, self.kernel_scale, getattr(self, _COLUMN_SUMS))
        return int8.product(int8.quantize_rows(inputs), kernel, self.bias, self.compute_dtype,
                            activation=self.activation)
