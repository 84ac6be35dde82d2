"""BertEncoder: outputs, masking, causal mode, checkpoint names, serialization, precision."""

import keras
import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from network.encoder import BertEncoder
from network.layers.activations import get_activation
from network.layers.transformer import TransformerBlock
from tests.fixtures import TestCase, tiny_config

CONFIG = tiny_config(vocab_size=100, max_position_embeddings=20, hidden_dropout_prob=0.0,
                     attention_probs_dropout_prob=0.0)
B, S = 2, 16


def features(seed=0, pad_from=11):
    rng = np.random.default_rng(seed)
    mask = np.ones((B, S), "int32")
    mask[1, pad_from:] = 0
    segments = np.zeros((B, S), "int32")
    segments[:, 6:] = 1
    return {"input_ids": rng.integers(0, 100, (B, S)).astype("int32"), "input_mask": mask,
            "segment_ids": segments * mask}


def numpy_outputs(model, inputs):
    return {key: keras.ops.convert_to_numpy(value)
            for key, value in model(inputs).items() if not isinstance(value, list)}


def expected_checkpoint_shapes(config):
    """Google's TF1 names and shapes, written out by hand."""
    h, i = config.hidden_size, config.intermediate_size
    shapes = {
        "bert/embeddings/word_embeddings": (config.vocab_size, h),
        "bert/embeddings/token_type_embeddings": (config.type_vocab_size, h),
        "bert/embeddings/position_embeddings": (config.max_position_embeddings, h),
        "bert/embeddings/LayerNorm/gamma": (h,), "bert/embeddings/LayerNorm/beta": (h,),
        "bert/pooler/dense/kernel": (h, h), "bert/pooler/dense/bias": (h,),
    }
    for n in range(config.num_hidden_layers):
        p = f"bert/encoder/layer_{n}"
        shapes.update({
            f"{p}/attention/self/query/kernel": (h, h), f"{p}/attention/self/query/bias": (h,),
            f"{p}/attention/self/key/kernel": (h, h), f"{p}/attention/self/key/bias": (h,),
            f"{p}/attention/self/value/kernel": (h, h), f"{p}/attention/self/value/bias": (h,),
            f"{p}/attention/output/dense/kernel": (h, h),
            f"{p}/attention/output/dense/bias": (h,),
            f"{p}/attention/output/LayerNorm/gamma": (h,),
            f"{p}/attention/output/LayerNorm/beta": (h,),
            f"{p}/intermediate/dense/kernel": (h, i), f"{p}/intermediate/dense/bias": (i,),
            f"{p}/output/dense/kernel": (i, h), f"{p}/output/dense/bias": (h,),
            f"{p}/output/LayerNorm/gamma": (h,), f"{p}/output/LayerNorm/beta": (h,),
        })
    return shapes


class EncoderTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.encoder = BertEncoder(CONFIG)

    def test_output_shapes(self):
        outputs = self.encoder(features())
        self.assertEqual(set(outputs), {"sequence_output", "pooled_output"})
        self.assertEqual(outputs["sequence_output"].shape, (B, S, 32))
        self.assertEqual(outputs["pooled_output"].shape, (B, 32))

    def test_pooler_is_tanh_dense_on_cls(self):
        outputs = numpy_outputs(self.encoder, features())
        kernel, bias = (keras.ops.convert_to_numpy(w) for w in self.encoder.pooler.weights)
        expected = np.tanh(outputs["sequence_output"][:, 0] @ kernel + bias)
        self.assertAllClose(outputs["pooled_output"], expected, rtol=1e-5, atol=1e-6)

    def test_hidden_states_and_attentions_on_request(self):
        full = BertEncoder(CONFIG, output_hidden_states=True, output_attentions=True)
        full.set_weights(self.encoder.get_weights())
        inputs = features()
        outputs = full(inputs)
        self.assertLen(outputs["hidden_states"], 3)
        self.assertLen(outputs["attentions"], 2)
        self.assertAllEqual(outputs["hidden_states"][-1], outputs["sequence_output"])
        self.assertAllEqual(outputs["hidden_states"][0],
                            full.embeddings(inputs["input_ids"], inputs["segment_ids"]))
        self.assertAllClose(outputs["sequence_output"],
                            self.encoder(inputs)["sequence_output"], rtol=1e-6, atol=1e-6)
        probs = keras.ops.convert_to_numpy(outputs["attentions"][1])
        self.assertEqual(probs.shape, (B, 2, S, S))
        self.assertEqual(probs.dtype, np.float32)
        self.assertAllClose(probs.sum(-1), np.ones((B, 2, S)), rtol=1e-5, atol=0)
        self.assertTrue(np.all(probs[1, :, :, 11:] == 0.0))

    @parameterized.parameters(False, True)
    def test_output_positions_are_those_positions_of_the_full_output(self, causal):
        model = BertEncoder(CONFIG, causal=causal)
        model.set_weights(self.encoder.get_weights())
        inputs = features()
        full = numpy_outputs(model, inputs)
        positions = np.array([[5, 0, 15], [10, 10, 2]], "int32")
        some = model(inputs, output_positions=positions)
        self.assertEqual(some["sequence_output"].shape, (B, 3, 32))
        expected = np.take_along_axis(full["sequence_output"], positions[:, :, None], axis=1)
        self.assertAllClose(some["sequence_output"], expected, rtol=1e-5, atol=1e-5)
        self.assertAllClose(some["pooled_output"], full["pooled_output"], rtol=1e-5, atol=1e-6)
        none = model(inputs, output_positions=np.zeros((B, 0), "int32"))
        self.assertEqual(none["sequence_output"].shape, (B, 0, 32))
        self.assertAllClose(none["pooled_output"], full["pooled_output"], rtol=1e-5, atol=1e-6)

    def test_output_positions_refuse_hidden_states_and_attentions(self):
        for flag in ("output_hidden_states", "output_attentions"):
            model = BertEncoder(CONFIG, **{flag: True})
            with self.assertRaisesRegex(ValueError, "output_positions .* " + flag):
                model(features(), output_positions=np.zeros((B, 1), "int32"))

    def test_padding_does_not_change_real_positions(self):
        inputs = features()
        changed = {key: value.copy() for key, value in inputs.items()}
        changed["input_ids"][1, 11:] = (changed["input_ids"][1, 11:] + 7) % 100
        before, after = numpy_outputs(self.encoder, inputs), numpy_outputs(self.encoder, changed)
        self.assertAllClose(before["sequence_output"][:, :11],
                            after["sequence_output"][:, :11], rtol=1e-6, atol=1e-6)
        self.assertAllClose(before["pooled_output"], after["pooled_output"], atol=1e-6, rtol=1e-7)

    @parameterized.parameters(True, False)
    def test_causal_attention_ignores_later_tokens(self, causal):
        model = BertEncoder(CONFIG, causal=causal)
        model.set_weights(self.encoder.get_weights())
        inputs = features()
        changed = {key: value.copy() for key, value in inputs.items()}
        changed["input_ids"][:, 8:] = (changed["input_ids"][:, 8:] + 13) % 100
        before = numpy_outputs(model, inputs)["sequence_output"]
        after = numpy_outputs(model, changed)["sequence_output"]
        unchanged = np.allclose(before[:, :8], after[:, :8], rtol=1e-6, atol=1e-6)
        self.assertEqual(unchanged, causal)
        self.assertFalse(np.allclose(before[:, 8:], after[:, 8:]))

    def test_checkpoint_names_and_shapes(self):
        variables = self.encoder.checkpoint_variables()
        shapes = {name: tuple(variable.shape) for name, variable in variables.items()}
        self.assertEqual(shapes, expected_checkpoint_shapes(CONFIG))
        trainable = self.encoder.trainable_variables
        self.assertLen(trainable, len(variables))
        self.assertEqual({id(v) for v in variables.values()}, {id(v) for v in trainable})
        self.assertIs(variables["bert/embeddings/word_embeddings"], self.encoder.embedding_table)

    def test_initializers(self):
        for name, variable in self.encoder.checkpoint_variables().items():
            value = keras.ops.convert_to_numpy(variable)
            if name.endswith(("bias", "beta")):
                self.assertAllEqual(value, np.zeros_like(value), msg=name)
            elif name.endswith("gamma"):
                self.assertAllEqual(value, np.ones_like(value), msg=name)
            else:
                self.assertTrue(np.abs(value).max() <= 0.04 and 0.01 < value.std() < 0.03, msg=name)

    @parameterized.parameters("gelu", "gelu_approximate", "relu")
    def test_configured_activation_is_used(self, activation):
        model = BertEncoder(CONFIG.replace(hidden_act=activation))
        dense = model.blocks[1].intermediate
        x = np.random.default_rng(3).normal(0, 30, (4, 32)).astype("float32")
        kernel, bias = (keras.ops.convert_to_numpy(w) for w in dense.weights)
        self.assertAllClose(dense(x),
                            get_activation(activation)(x @ kernel + bias), rtol=1e-6, atol=1e-6)

    def test_every_block_is_built_with_the_configs_settings(self):
        """Each setting reaches its own slot: the block takes them by keyword only."""
        config = CONFIG.replace(hidden_act="relu", initializer_range=0.03,
                                layer_norm_eps=1e-6, hidden_dropout_prob=0.125,
                                attention_probs_dropout_prob=0.25)
        for block in BertEncoder(config).blocks:
            settings = block.get_config()
            self.assertEqual({key: settings[key] for key in (
                "hidden_size", "num_heads", "intermediate_size", "hidden_act",
                "initializer_range", "layer_norm_eps", "hidden_dropout_prob",
                "attention_probs_dropout_prob")}, {
                "hidden_size": 32, "num_heads": 2, "intermediate_size": 64,
                "hidden_act": "relu", "initializer_range": 0.03, "layer_norm_eps": 1e-6,
                "hidden_dropout_prob": 0.125, "attention_probs_dropout_prob": 0.25})
            self.assertEqual(block.attention.dropout_rate, 0.25)
        with self.assertRaisesRegex(TypeError, "positional"):
            TransformerBlock(32, 2, 64, "relu")

    def test_from_config_round_trip(self):
        clone = BertEncoder.from_config(self.encoder.get_config())
        self.assertEqual(clone.config, self.encoder.config)
        self.assertEqual([(v.path, v.shape) for v in clone.weights],
                         [(v.path, v.shape) for v in self.encoder.weights])
        clone.set_weights(self.encoder.get_weights())
        inputs = features()
        for key, value in numpy_outputs(self.encoder, inputs).items():
            self.assertAllEqual(numpy_outputs(clone, inputs)[key], value)

    def test_keras_file_round_trip(self):
        tmp_path = self.tmp_path()
        model = BertEncoder(CONFIG, causal=True, output_hidden_states=True)
        model.set_weights([w + 0.01 for w in self.encoder.get_weights()])
        path = str(tmp_path / "encoder.keras")
        model.save(path)
        loaded = keras.models.load_model(path)
        self.assertIsInstance(loaded, BertEncoder)
        self.assertTrue(loaded.causal)
        self.assertTrue(loaded.output_hidden_states)
        inputs = features()
        expected, got = model(inputs), loaded(inputs)
        self.assertAllEqual(got["sequence_output"], expected["sequence_output"])
        self.assertAllEqual(got["hidden_states"][1], expected["hidden_states"][1])

    def test_jit_compiled_forward_matches_eager(self):
        inputs = {key: tf.constant(value) for key, value in features().items()}
        compiled = tf.function(lambda x: self.encoder(x), jit_compile=True)(inputs)
        eager = self.encoder(inputs)
        self.assertAllClose(compiled["sequence_output"],
                            eager["sequence_output"], rtol=1e-4, atol=1e-4)

    @parameterized.parameters([("mixed_float16", 2e-2),
                                                   ("mixed_bfloat16", 1e-1)])
    def test_mixed_precision(self, policy, tolerance):
        keras.mixed_precision.set_global_policy(policy)
        try:
            mixed = BertEncoder(CONFIG, output_attentions=True)
        finally:
            keras.mixed_precision.set_global_policy("float32")
        mixed.set_weights(self.encoder.get_weights())
        self.assertTrue(all(v.dtype == "float32" for v in mixed.weights))
        self.assertEqual(mixed.blocks[0].attention_layer_norm.compute_dtype, "float32")
        self.assertEqual(mixed.embeddings.layer_norm.compute_dtype, "float32")
        inputs = features()
        outputs = mixed(inputs)
        self.assertEqual(outputs["sequence_output"].dtype, policy.split("_")[1])
        self.assertEqual(outputs["attentions"][0].dtype, "float32")
        expected = numpy_outputs(self.encoder, inputs)["sequence_output"]
        got = keras.ops.convert_to_numpy(keras.ops.cast(outputs["sequence_output"], "float32"))
        self.assertAllClose(got, expected, atol=tolerance, rtol=1e-7)

    def test_sequence_longer_than_positions_is_rejected(self):
        inputs = {key: np.zeros((1, 21), "int32") for key in ("input_ids", "input_mask",
                                                              "segment_ids")}
        with self.assertRaisesRegex(ValueError, "21 positions .* max_position_embeddings=20"):
            self.encoder(inputs)


if __name__ == "__main__":
    tf.test.main()
