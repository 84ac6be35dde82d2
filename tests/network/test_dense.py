"""`add_bias` and `Dense`: Keras's values, with the bias gradient summed by a product under XLA."""

import re

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from network.layers.dense import Dense
from network.layers.fast_paths import add_bias

WIDTH = 24


def _gradients(layer, inputs):
    with tf.GradientTape() as tape:
        tape.watch(inputs)
        outputs = layer(inputs)
        loss = tf.reduce_sum(outputs * tf.sin(outputs))
    return [outputs, *tape.gradient(loss, [inputs, *layer.trainable_variables])]


def _layers(dtype=None):
    ours = Dense(WIDTH, activation="tanh", dtype=dtype)
    reference = keras.layers.Dense(WIDTH, activation="tanh", dtype=dtype)
    for layer in (ours, reference):
        layer.build((None, None, 16))
    rng = np.random.default_rng(0)
    ours.set_weights([rng.normal(size=w.shape).astype("float32") for w in ours.get_weights()])
    reference.set_weights(ours.get_weights())
    return ours, reference


# 4096 rows is where a row of float32 ones reaches the 16 KiB from which XLA's
# CPU backend stops fusing the gradient's producer into the product.


class DenseTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters([(8, False), (64, True)])
    def test_dense_under_xla_matches_keras_and_sums_the_bias_gradient_by_a_product_from_4096_rows(self, batch, summed_by_product):
        ours, reference = _layers()
        inputs = tf.constant(np.random.default_rng(1).normal(size=(batch, 64, 16)), tf.float32)
        # The batch dimension is unknown when traced, as in the runners' steps.
        signature = [tf.TensorSpec([None, 64, 16], tf.float32)]
        compiled = tf.function(lambda x: _gradients(ours, x), jit_compile=True,
                               input_signature=signature)
        compiled_reference = tf.function(lambda x: _gradients(reference, x), jit_compile=True,
                                         input_signature=signature)
        for got, want in zip(compiled(inputs), compiled_reference(inputs)):
            # Sums of up to 4096 float32 terms, taken in another order for the bias.
            scale = float(tf.reduce_max(tf.abs(want)))
            self.assertAllClose(got.numpy(), want.numpy(), rtol=1e-5, atol=1e-6 * scale)
        hlo = compiled.experimental_get_compiler_ir(inputs)(stage="optimized_hlo")
        bias_by_product = re.search(rf"f32\[{WIDTH}\]\{{0\}} dot\(", hlo) is not None
        self.assertEqual(bias_by_product, summed_by_product)

    def test_dense_under_xla_in_mixed_bfloat16_is_keras_exactly(self):
        """16-bit gradients keep XLA's own sum: a product's accumulation type is not ours to set."""
        ours, reference = _layers(dtype="mixed_bfloat16")
        inputs = tf.constant(np.random.default_rng(2).normal(size=(64, 64, 16)), tf.float32)
        got = tf.function(lambda x: _gradients(ours, x), jit_compile=True)(inputs)
        want = tf.function(lambda x: _gradients(reference, x), jit_compile=True)(inputs)
        self.assertEqual([t.dtype for t in got], [t.dtype for t in want])
        for g, w in zip(got, want):
            self.assertAllEqual(g.numpy(), w.numpy())

    def test_add_bias_outside_xla_is_plain_addition(self):
        inputs = tf.constant(np.random.default_rng(3).normal(size=(64, 64, 8)), tf.float32)
        bias = tf.Variable(tf.range(8, dtype=tf.float32))

        @tf.function
        def graph(x):
            with tf.GradientTape() as tape:
                y = add_bias(x, bias)
                loss = tf.reduce_sum(y * y)
            return y, tape.gradient(loss, bias)

        outputs, gradient = graph(inputs)
        self.assertAllEqual(outputs.numpy(), (inputs + bias).numpy())
        self.assertAllClose(gradient.numpy(),
                            tf.reduce_sum(2 * outputs, [0, 1]).numpy(), rtol=1e-5, atol=0)
        op_types = {op.type for op in graph.get_concrete_function(inputs).graph.get_operations()}
        self.assertNotIn("MatMul", op_types)
        self.assertNotIn("If", op_types)
        self.assertNotIn("StatelessIf", op_types)

    def test_dense_serializes_as_itself(self):
        layer = Dense(3, activation="relu", name="pooler")
        restored = keras.saving.deserialize_keras_object(keras.saving.serialize_keras_object(layer))
        self.assertIs(type(restored), Dense)
        self.assertEqual(restored.get_config(), layer.get_config())


if __name__ == "__main__":
    tf.test.main()
