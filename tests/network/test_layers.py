"""BERT layers against plain numpy re-computations of the paper's formulas, and the shared
layer harness (shapes, config round trip, `.keras` reload, mixed precision) over each layer."""

import math

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from network.layers.activations import get_activation
from network.layers.attention import MASK_BIAS, SelfAttention, attention_bias
from network.layers.dense import Dense
from network.layers.embeddings import BertEmbeddings
from network.layers.transformer import TransformerBlock
from tests.modeling import harness
from tests.network.layer_references import (FFN, HEADS, RNG, B, H, S, erf, layer_norm, padded_mask,
                                            random_weights, reference_attention, reset_rng)


def _hidden_inputs() -> tuple[np.ndarray, np.ndarray]:
    return RNG.normal(size=(B, S, H)).astype("float32"), attention_bias(padded_mask()).numpy()


def _id_inputs() -> tuple[np.ndarray, np.ndarray]:
    return (RNG.integers(0, 11, (B, S)).astype("int32"),
            (np.arange(S) >= S // 2).astype("int32")[None].repeat(B, 0))


# name: (factory, inputs, output shape, output dtype under dtype="mixed_float16")
LAYER_CASES = {
    "attention": (lambda **kw: SelfAttention(H, HEADS, **kw), _hidden_inputs, (B, S, H),
                  "float16"),
    "transformer_block": (lambda **kw: TransformerBlock(H, HEADS, FFN, **kw), _hidden_inputs,
                          (B, S, H), "float16"),
    "embeddings": (lambda **kw: BertEmbeddings(11, H, 9, 2, **kw), _id_inputs, (B, S, H),
                   "float16"),
    "dense": (lambda **kw: Dense(FFN, activation="gelu", **kw), lambda: _hidden_inputs()[:1],
              (B, S, FFN), "float16"),
}


class LayersTest(harness.KerasTestCase):

    def setUp(self):
        super().setUp()
        reset_rng()

    @parameterized.named_parameters((name, name) for name in sorted(LAYER_CASES))
    def test_layer_contract(self, name):
        make, inputs, shape, dtype = LAYER_CASES[name]
        self.run_layer_test(make, inputs(), shape, dtype)

    @parameterized.parameters([
        ("gelu", lambda x: 0.5 * x * (1 + erf(x / math.sqrt(2)))),
        ("gelu_approximate",
         lambda x: 0.5 * x * (1 + np.tanh(math.sqrt(2 / math.pi) * (x + 0.044715 * x ** 3)))),
        ("relu", lambda x: np.maximum(x, 0))])
    def test_activations(self, name, reference):
        x = np.linspace(-4, 4, 41).astype("float32")
        result = keras.ops.convert_to_numpy(get_activation(name)(x))
        self.assertAllClose(result, reference(x), rtol=1e-5, atol=1e-6)

    def test_exact_and_approximate_gelu_differ(self):
        x = np.array([-2.5, 1.7], "float32")
        difference = get_activation("gelu")(x) - get_activation("gelu_approximate")(x)
        self.assertGreater(np.abs(keras.ops.convert_to_numpy(difference)).max(), 1e-5)

    def test_unknown_activation(self):
        with self.assertRaisesRegex(ValueError, "unknown activation 'swish'"):
            get_activation("swish")

    def test_attention_bias_padding_and_causal(self):
        mask = np.array([[1, 1, 0]])
        bias = keras.ops.convert_to_numpy(attention_bias(mask))
        self.assertAllEqual(bias, [[[[0, 0, MASK_BIAS]]]])
        causal = keras.ops.convert_to_numpy(attention_bias(mask, causal=True))[0, 0]
        expected = np.array([[0, 1, 1], [0, 0, 1], [0, 0, 1]]) * MASK_BIAS
        self.assertAllEqual(causal, expected)
        self.assertEqual(causal.dtype, np.float32)

    def test_attention_stores_google_shapes_and_initializers(self):
        layer = SelfAttention(H, HEADS, initializer_range=0.05)
        layer.build()
        for name in ("query", "key", "value", "output"):
            kernel = keras.ops.convert_to_numpy(getattr(layer, f"{name}_kernel"))
            self.assertEqual(kernel.shape, (H, H))
            self.assertLessEqual(np.abs(kernel).max(), 2 * 0.05)
            self.assertGreater(kernel.std(), 0.02)
            self.assertAllEqual(keras.ops.convert_to_numpy(getattr(layer, f"{name}_bias")),
                                np.zeros(H))

    def test_attention_matches_separate_projections(self):
        layer = SelfAttention(H, HEADS, dropout_rate=0.0)
        layer.build()
        random_weights(layer)
        x = RNG.normal(size=(B, S, H)).astype("float32")
        mask = padded_mask()
        output, probs = layer(x, attention_bias(mask), return_probabilities=True)
        expected_output, expected_probs = reference_attention(layer, x, mask)
        self.assertAllClose(keras.ops.convert_to_numpy(probs), expected_probs, atol=1e-5, rtol=1e-7)
        self.assertAllClose(keras.ops.convert_to_numpy(output),
                            expected_output, rtol=1e-4, atol=1e-4)
        self.assertTrue(np.all(keras.ops.convert_to_numpy(probs)[1, :, :, 4:] == 0.0))

    def test_padded_keys_do_not_influence_real_positions(self):
        layer = SelfAttention(H, HEADS, dropout_rate=0.0)
        mask = padded_mask()
        x = RNG.normal(size=(B, S, H)).astype("float32")
        changed = x.copy()
        changed[1, 4:] = RNG.normal(size=(S - 4, H))
        bias = attention_bias(mask)
        before = keras.ops.convert_to_numpy(layer(x, bias))
        after = keras.ops.convert_to_numpy(layer(changed, bias))
        self.assertAllEqual(before[1, :4], after[1, :4])
        self.assertAllEqual(before[0], after[0])

    def test_transformer_block_is_post_layer_norm(self):
        block = TransformerBlock(H, HEADS, FFN, hidden_act="gelu", layer_norm_eps=1e-12,
                                 hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0)
        block.build()
        random_weights(block)
        x = RNG.normal(size=(B, S, H)).astype("float32")
        mask = padded_mask()
        output = keras.ops.convert_to_numpy(block(x, attention_bias(mask)))

        def weights(layer):
            return [keras.ops.convert_to_numpy(w) for w in layer.weights]
        attended, _ = reference_attention(block.attention, x, mask)
        hidden = layer_norm(x + attended, *weights(block.attention_layer_norm))
        w1, b1 = weights(block.intermediate)
        w2, b2 = weights(block.output_dense)
        inner = hidden @ w1 + b1
        inner = 0.5 * inner * (1 + erf(inner / math.sqrt(2)))
        expected = layer_norm(hidden + inner @ w2 + b2, *weights(block.output_layer_norm))
        self.assertAllClose(output, expected, rtol=1e-4, atol=1e-4)

    def test_transformer_block_initializers(self):
        block = TransformerBlock(H, HEADS, FFN, initializer_range=0.02)
        block.build()
        for variable in block.weights:
            value = keras.ops.convert_to_numpy(variable)
            if variable.name.endswith("kernel"):
                self.assertTrue(np.abs(value).max() <= 0.04 and value.std() > 0.01,
                                msg=variable.path)
            elif variable.name.endswith("bias") or variable.name == "beta":
                self.assertAllEqual(value, np.zeros_like(value), msg=variable.path)
            else:
                self.assertEqual(variable.name, "gamma")
                self.assertAllEqual(value, np.ones_like(value), msg=variable.path)

    def test_embeddings_sum_then_layer_norm(self):
        layer = BertEmbeddings(vocab_size=11, hidden_size=H, max_position_embeddings=S + 3,
                               type_vocab_size=2, layer_norm_eps=1e-12, dropout_rate=0.0)
        layer.build()
        random_weights(layer)
        ids = RNG.integers(0, 11, (B, S))
        segments = RNG.integers(0, 2, (B, S))
        output = keras.ops.convert_to_numpy(layer(ids, segments))
        word, token_type, position, gamma, beta = (
            keras.ops.convert_to_numpy(v) for v in (
                layer.word_embeddings, layer.token_type_embeddings, layer.position_embeddings,
                layer.layer_norm.gamma, layer.layer_norm.beta))
        expected = layer_norm(word[ids] + token_type[segments] + position[None, :S], gamma, beta)
        self.assertAllClose(output, expected, rtol=1e-5, atol=1e-5)
        self.assertEqual((word.shape, token_type.shape, position.shape),
                         ((11, H), (2, H), (S + 3, H)))

    def test_embeddings_reject_sequences_longer_than_positions(self):
        layer = BertEmbeddings(11, H, max_position_embeddings=4, type_vocab_size=2)
        with self.assertRaisesRegex(ValueError, "input_ids has 7 positions but the model has only "
                                                "max_position_embeddings=4"):
            layer(np.zeros((1, 7), "int32"), np.zeros((1, 7), "int32"))

    @parameterized.parameters([{'layer': v} for v in [
        SelfAttention(H, HEADS, initializer_range=0.03, dropout_rate=0.2, name="attention"),
        TransformerBlock(H, HEADS, FFN, hidden_act="relu", layer_norm_eps=1e-6, name="layer_3"),
        BertEmbeddings(11, H, 9, 3, initializer_range=0.01, layer_norm_eps=1e-5, name="emb")]])
    def test_get_config_round_trip(self, layer):
        config = layer.get_config()
        clone = type(layer).from_config(config)
        self.assertEqual(clone.get_config(), config)
        serialized = keras.saving.serialize_keras_object(layer)
        self.assertTrue(serialized["registered_name"].startswith("bert>"))
        self.assertEqual(keras.saving.deserialize_keras_object(serialized).get_config(), config)


if __name__ == "__main__":
    tf.test.main()
