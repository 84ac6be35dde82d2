"""The Dense layer of BERT's projections, feed-forward and heads."""

from __future__ import annotations

import keras
from keras import ops

from modeling.layers import fast_paths


@keras.saving.register_keras_serializable(package="bert")
class Dense(keras.layers.Dense):
    """`keras.layers.Dense` whose bias is added by `fast_paths.add_bias`.

    Only the bias gradient's computation under XLA differs; weights, names,
    config and outputs are Keras's.
    """

    def call(self, inputs, training=None):
        if self.bias is None or self.quantization_mode:
            return super().call(inputs, training=training)
        outputs = fast_paths.add_bias(ops.matmul(inputs, self.kernel), self.bias)
        if self.activation is not None:
            outputs = self.activation(outputs)
        return outputs
