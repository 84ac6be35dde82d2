"""Pre-training heads: tied masked-LM / left-to-right LM outputs and next-sentence head."""

import math

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from network.encoder import BertEncoder
from network.heads import LeftToRightLMHead, MaskedLMHead, NextSentenceHead
from tests.fixtures import tiny_config

CONFIG = tiny_config(vocab_size=100, max_position_embeddings=16)
B, S, P = 2, 16, 5
RNG = np.random.default_rng(7)


def randomize(layer):
    for variable in layer.weights:
        variable.assign(RNG.normal(0, 0.5, variable.shape).astype("float32"))


def reference_lm_logits(head, hidden):
    kernel, bias = (keras.ops.convert_to_numpy(w) for w in head.transform.weights)
    gamma, beta = (keras.ops.convert_to_numpy(w) for w in head.layer_norm.weights)
    table = keras.ops.convert_to_numpy(head.embedding_table)
    x = hidden @ kernel + bias
    x = 0.5 * x * (1 + np.vectorize(math.erf)(x / math.sqrt(2)))
    mean, variance = x.mean(-1, keepdims=True), x.var(-1, keepdims=True)
    x = (x - mean) / np.sqrt(variance + 1e-12) * gamma + beta
    return x @ table.T + keras.ops.convert_to_numpy(head.output_bias)


class HeadsTest(tf.test.TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.encoder = BertEncoder(CONFIG)

    def test_masked_lm_logits_only_at_masked_positions(self):
        head = MaskedLMHead(CONFIG, self.encoder.embedding_table)
        randomize(head)
        hidden = RNG.normal(size=(B, S, 32)).astype("float32")
        positions = np.array([[1, 4, 9, 0, 0], [2, 3, 15, 7, 0]], "int32")
        logits = keras.ops.convert_to_numpy(head(hidden, positions))
        self.assertEqual(logits.shape, (B, P, CONFIG.vocab_size))
        self.assertEqual(logits.dtype, np.float32)
        gathered = np.take_along_axis(hidden, positions[:, :, None], axis=1)
        self.assertAllClose(logits, reference_lm_logits(head, gathered), rtol=1e-4, atol=1e-4)

        unmasked = hidden.copy()
        unmasked[0, [5, 6, 15]] += 3.0
        unmasked[1, [1, 9]] -= 2.0
        self.assertAllEqual(head(unmasked, positions), logits)
        masked = hidden.copy()
        masked[1, 15] += 1.0
        changed = keras.ops.convert_to_numpy(head(masked, positions))
        self.assertFalse(np.allclose(changed[1, 2], logits[1, 2]))
        self.assertAllEqual(changed[0], logits[0])

    def test_output_is_tied_to_the_embedding_table(self):
        encoder = BertEncoder(CONFIG)
        head = MaskedLMHead(CONFIG, encoder.embedding_table)
        self.assertTrue(all(w is not encoder.embedding_table for w in head.weights))
        self.assertLen(head.weights, 5)
        hidden = RNG.normal(size=(1, S, 32)).astype("float32")
        positions = np.array([[3]])
        before = keras.ops.convert_to_numpy(head(hidden, positions))
        table = keras.ops.convert_to_numpy(encoder.embedding_table)
        table[42] += RNG.normal(size=32)
        encoder.embedding_table.assign(table)
        after = keras.ops.convert_to_numpy(head(hidden, positions))
        self.assertFalse(np.isclose(after[0, 0, 42], before[0, 0, 42]))
        self.assertAllEqual(np.delete(after, 42, -1), np.delete(before, 42, -1))

    def test_left_to_right_head_is_the_lm_transform_at_every_position(self):
        head = LeftToRightLMHead(CONFIG, self.encoder.embedding_table)
        randomize(head)
        hidden = RNG.normal(size=(B, S, 32)).astype("float32")
        logits = keras.ops.convert_to_numpy(head(hidden))
        self.assertEqual(logits.shape, (B, S, CONFIG.vocab_size))
        self.assertAllClose(logits, reference_lm_logits(head, hidden), rtol=1e-4, atol=1e-4)
        masked = MaskedLMHead(CONFIG, self.encoder.embedding_table)
        masked.set_weights(head.get_weights())
        all_positions = np.tile(np.arange(S), (B, 1))
        self.assertAllClose(masked(hidden, all_positions), logits, rtol=1e-6, atol=1e-5)

    def test_next_sentence_head_uses_google_layout(self):
        head = NextSentenceHead(CONFIG)
        randomize(head)
        pooled = RNG.normal(size=(B, 32)).astype("float32")
        weights, bias = (keras.ops.convert_to_numpy(w) for w in (head.output_weights,
                                                                 head.output_bias))
        self.assertEqual(weights.shape, (2, 32))
        self.assertEqual(bias.shape, (2,))
        self.assertAllClose(head(pooled), pooled @ weights.T + bias, rtol=1e-5, atol=1e-5)

    @parameterized.parameters(MaskedLMHead, LeftToRightLMHead)
    def test_lm_head_checkpoint_names(self, head_class):
        head = head_class(CONFIG, self.encoder.embedding_table)
        shapes = {name: tuple(v.shape) for name, v in head.checkpoint_variables().items()}
        self.assertEqual(shapes, {
            "cls/predictions/transform/dense/kernel": (32, 32),
            "cls/predictions/transform/dense/bias": (32,),
            "cls/predictions/transform/LayerNorm/gamma": (32,),
            "cls/predictions/transform/LayerNorm/beta": (32,),
            "cls/predictions/output_bias": (100,),
        })
        self.assertEqual({id(v) for v in head.checkpoint_variables().values()},
                         {id(v) for v in head.trainable_variables})

    def test_next_sentence_checkpoint_names_and_config(self):
        head = NextSentenceHead(CONFIG, name="nsp")
        shapes = {name: tuple(v.shape) for name, v in head.checkpoint_variables().items()}
        self.assertEqual(shapes, {"cls/seq_relationship/output_weights": (2, 32),
                                  "cls/seq_relationship/output_bias": (2,)})
        clone = NextSentenceHead.from_config(head.get_config())
        self.assertEqual(clone.name, "nsp")
        self.assertEqual(clone.config, CONFIG)

    def test_initializers(self):
        head = MaskedLMHead(tiny_config(vocab_size=100, max_position_embeddings=16,
                                        initializer_range=0.05),
                            self.encoder.embedding_table)
        kernel = keras.ops.convert_to_numpy(head.transform.kernel)
        self.assertLessEqual(np.abs(kernel).max(), 0.1)
        self.assertGreater(kernel.std(), 0.03)
        bias = keras.ops.convert_to_numpy(head.output_bias)
        gamma = keras.ops.convert_to_numpy(head.layer_norm.gamma)
        self.assertAllEqual(bias, np.zeros_like(bias))
        self.assertAllEqual(gamma, np.ones_like(gamma))

    def test_mismatched_embedding_table_is_rejected(self):
        other = BertEncoder(CONFIG.replace(vocab_size=50))
        with self.assertRaisesRegex(ValueError, r"embedding_table has shape \(50, 32\), expected "
                                                r"\[vocab_size, hidden_size\] = \(100, 32\)"):
            MaskedLMHead(CONFIG, other.embedding_table)

    def test_mixed_float16_logits_are_float32(self):
        keras.mixed_precision.set_global_policy("mixed_float16")
        try:
            head = MaskedLMHead(CONFIG, self.encoder.embedding_table)
        finally:
            keras.mixed_precision.set_global_policy("float32")
        hidden = keras.ops.cast(RNG.normal(size=(B, S, 32)), "float16")
        logits = head(hidden, np.zeros((B, P), "int32"))
        self.assertEqual(logits.dtype, "float32")
        self.assertEqual(head.layer_norm.compute_dtype, "float32")
        self.assertTrue(np.isfinite(keras.ops.convert_to_numpy(logits)).all())


if __name__ == "__main__":
    tf.test.main()
