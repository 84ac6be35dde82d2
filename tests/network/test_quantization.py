"""`model.quantize("int8")`: every projection int8, outputs near float32, saved, exported.

Tolerances: an int8 model's outputs differ from the float32 model's by
quantization (7 bits per weight column and per activation row); on these
tiny random models the difference was at most 1.7% of the outputs' largest
value and 1.5% of their RMS, so `_INT8_RTOL` = 3% of each. The two ways of
computing the int8 product (oneDNN's kernel and Keras' own int8 matmul) give
the same integers, so they agree to float32 rounding (`_ROUNDING`).
"""

import os
import warnings
from pathlib import Path

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from export.serving import ClassifierServing, export_classifier
from modeling.classifier import BertClassifier
from modeling.multiple_choice import BertMultipleChoice
from modeling.pretrainer import BertPretrainer
from modeling.span_model import BertSpanModel
from modeling.token_tagger import BertTokenTagger
from network.encoder import BertEncoder
from network.layers import fast_paths, int8
from network.layers.dense import Dense
from network.quantization import quantizable_layers
from tests.fixtures import tiny_config
from tests.modeling.tiny_folder import tiny_folder
from text.tokenization import FullTokenizer

_INT8_RTOL = 0.03
_ROUNDING = 1e-5
_LAYERS = tiny_config().num_hidden_layers
# Per block: query, key, value, attention output, intermediate, output; then the pooler.
_ENCODER_INT8_KERNELS = 6 * _LAYERS + 1

MODELS = (
    ("encoder", BertEncoder, {}, (3, 16), _ENCODER_INT8_KERNELS),
    ("classifier", BertClassifier, {"num_labels": 3}, (3, 16), _ENCODER_INT8_KERNELS + 1),
    ("tagger", BertTokenTagger, {"num_labels": 5}, (3, 16), _ENCODER_INT8_KERNELS + 1),
    ("span", BertSpanModel, {}, (3, 16), _ENCODER_INT8_KERNELS + 1),
    ("multiple_choice", BertMultipleChoice, {}, (2, 4, 16), _ENCODER_INT8_KERNELS + 1),
    # The tied vocabulary projection and the next-sentence head stay float.
    ("pretrainer", BertPretrainer, {}, (3, 16), _ENCODER_INT8_KERNELS + 1),
)


def _features(model_class, shape, seed=0):
    generator = np.random.default_rng(seed)
    mask = np.ones(shape, "int32")
    mask[..., -3:] = 0  # some padding
    features = {"input_ids": generator.integers(0, 64, shape).astype("int32"),
                "input_mask": mask, "segment_ids": np.zeros(shape, "int32")}
    if model_class is BertPretrainer:
        features["masked_lm_positions"] = np.tile(np.array([[1, 4, 6]], "int32"), (shape[0], 1))
    return features


def _flat(outputs) -> np.ndarray:
    if isinstance(outputs, dict):
        return np.concatenate([np.ravel(outputs[key]) for key in sorted(outputs)])
    return np.ravel(outputs)


def _quantized(model):
    """Quantizes `model`, failing on any warning it raises."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        model.quantize("int8")
    assert not caught, [str(warning.message) for warning in caught]
    return model


class QuantizedModelsTest(tf.test.TestCase, parameterized.TestCase):

    def assertNearFloat(self, int8_outputs, float_outputs):
        difference = _flat(int8_outputs) - _flat(float_outputs)
        reference = _flat(float_outputs)
        self.assertLessEqual(np.abs(difference).max(), _INT8_RTOL * np.abs(reference).max())
        self.assertLessEqual(np.linalg.norm(difference), _INT8_RTOL * np.linalg.norm(reference))

    @parameterized.named_parameters(*MODELS)
    def test_quantizes_silently_stays_near_float32_and_reloads(self, model_class, kwargs,
                                                                shape, int8_kernels):
        """One model of each kind, quantized once, for three checks of it."""
        keras.utils.set_random_seed(1)
        model = model_class(tiny_config(), **kwargs)
        features = _features(model_class, shape)
        float_outputs = model(features, training=False)
        int8_outputs = _quantized(model)(features, training=False)
        with self.subTest("outputs stay near float32"):
            self.assertNearFloat(int8_outputs, float_outputs)
        with self.subTest("every projection becomes int8"):
            self.assertLen([weight for weight in model.weights if weight.dtype == "int8"],
                           int8_kernels)
            # What stays float and two-dimensional is a lookup table or a head named above.
            float_matrices = {weight.path.split("/")[-1] for weight in model.weights
                              if weight.dtype == "float32" and len(weight.shape) == 2}
            allowed = {"word_embeddings", "token_type_embeddings", "position_embeddings",
                       "output_weights"}  # the next-sentence head's
            self.assertContainsSubset(float_matrices, allowed)
            self.assertTrue(all(layer.quantization_mode == "int8"
                                for layer in quantizable_layers(model)))
        with self.subTest("the saved model reloads with equal outputs"):
            path = os.path.join(self.create_tempdir().full_path, "model.keras")
            model.save(path)
            reloaded = keras.saving.load_model(path)
            self.assertAllEqual(_flat(reloaded(features, training=False)), _flat(int8_outputs))
            self.assertEqual(sum(weight.dtype == "int8" for weight in reloaded.weights),
                             sum(weight.dtype == "int8" for weight in model.weights))

    def test_compiled_model_quantizes_and_reloads(self):
        """Loading compiles a quantized model again, after quantizing it."""
        model = BertClassifier(tiny_config(), num_labels=2)
        model.compile()
        _quantized(model)
        model.compile()  # a quantized model can still be compiled
        features = _features(BertClassifier, (3, 16))
        path = os.path.join(self.create_tempdir().full_path, "model.keras")
        model.save(path)
        reloaded = keras.saving.load_model(path)
        self.assertAllEqual(reloaded.predict(features, verbose=0),
                            model.predict(features, verbose=0))

    def test_float16_policy_is_refused(self):
        model = BertClassifier(tiny_config(), num_labels=2, dtype="mixed_float16")
        with self.assertRaisesRegex(ValueError, "dtype policy is 'mixed_float16'"):
            model.quantize("int8")

    def test_mixed_bfloat16_model_quantizes(self):
        keras.utils.set_random_seed(2)
        model = BertClassifier(tiny_config(), num_labels=2, dtype="mixed_bfloat16")
        features = _features(BertClassifier, (3, 16))
        float_outputs = model(features, training=False)
        int8_outputs = _quantized(model)(features, training=False)
        self.assertEqual(int8_outputs.dtype, tf.float32)
        self.assertNearFloat(int8_outputs, float_outputs)

    @parameterized.named_parameters(("one_sequence", (1, 16)), ("batch", (40, 16)))
    def test_fast_path_and_keras_int8_product_agree(self, shape):
        """oneDNN's kernel (fast path) and Keras' int8 matmul give one model the same outputs."""
        if not int8.onednn_available():
            self.skipTest("oneDNN's int8 kernel does not run here, so there is no fast path")
        model = _quantized(BertSpanModel(tiny_config()))
        features = _features(BertSpanModel, shape)
        fast = _flat(model(features, training=False))
        with fast_paths.disabled():
            plain = _flat(model(features, training=False))
        self.assertAllClose(fast, plain, rtol=_ROUNDING, atol=_ROUNDING * np.abs(plain).max())

    @pytest.mark.long
    def test_xla_compiles_the_int8_model(self):
        model = _quantized(BertClassifier(tiny_config(), num_labels=3))
        features = _features(BertClassifier, (3, 16))
        compiled = tf.function(lambda: model(features, training=False), jit_compile=True)
        expected = model(features, training=False)
        self.assertAllClose(compiled(), expected, rtol=_ROUNDING,
                            atol=_ROUNDING * np.abs(expected).max())


class Int8DenseTest(tf.test.TestCase):

    def test_dense_computes_keras_own_int8_dense(self):
        """Our int8 Dense (either path) gives what `keras.layers.Dense` quantized by Keras gives."""
        inputs = tf.constant(np.random.default_rng(3).standard_normal((5, 7, 24)), tf.float32)
        keras_dense = keras.layers.Dense(40, activation="tanh")
        keras_dense.build((None, 24))
        ours = Dense(40, activation="tanh")
        ours.build((None, 24))
        ours.set_weights(keras_dense.get_weights())
        keras_dense.quantize("int8")
        _quantized(ours)
        expected = keras_dense(inputs)
        self.assertAllClose(ours(inputs), expected, rtol=_ROUNDING, atol=_ROUNDING)
        with fast_paths.disabled():
            self.assertAllClose(ours(inputs), expected, rtol=_ROUNDING, atol=_ROUNDING)

    def test_kernel_is_int8_with_scale_and_column_sums(self):
        dense = Dense(6)
        dense.build((None, 4))
        kernel = dense.kernel.numpy()
        _quantized(dense)
        quantized = dense.kernel.numpy()
        self.assertEqual(quantized.dtype, np.int8)
        self.assertAllClose(quantized / dense.kernel_scale.numpy(), kernel,
                            atol=np.abs(kernel).max() / 127)
        self.assertAllEqual(dense.kernel_column_sums, np.sum(quantized, axis=0))


class QuantizeErrorsTest(tf.test.TestCase):

    def test_second_quantize_is_refused(self):
        model = _quantized(BertClassifier(tiny_config(), num_labels=2))
        with self.assertRaisesRegex(ValueError, "already quantized"):
            model.quantize("int8")

    def test_other_modes_are_refused(self):
        model = BertEncoder(tiny_config())
        with self.assertRaisesRegex(ValueError, "mode 'int4' is not supported here; mode must "
                                                "be 'int8'"):
            model.quantize("int4")
        with self.assertRaisesRegex(ValueError, "mode 'int16' is not supported here"):
            model.quantize("int16")
        with self.assertRaisesRegex(ValueError, "mode None is not supported here"):
            model.quantize()
        self.assertFalse(any(weight.dtype == "int8" for weight in model.weights))

    def test_filters_and_custom_quantizers_are_refused(self):
        model = BertEncoder(tiny_config())
        with self.assertRaisesRegex(ValueError, "filters='pooler' is not supported"):
            model.quantize("int8", filters="pooler")
        custom = keras.quantizers.Int8QuantizationConfig(
            activation_quantizer=keras.quantizers.AbsMaxQuantizer(value_range=(-100, 100)))
        with self.assertRaisesRegex(ValueError, "sets its own quantizers"):
            model.quantize(config=custom)
        self.assertFalse(any(weight.dtype == "int8" for weight in model.weights))

    def test_training_call_is_refused(self):
        model = _quantized(BertClassifier(tiny_config(), num_labels=2))
        with self.assertRaisesRegex(ValueError, "inference only.*training=True"):
            model(_features(BertClassifier, (2, 8)), training=True)

    def test_partly_quantized_model_cannot_be_saved(self):
        model = BertClassifier(tiny_config(), num_labels=2)
        _quantized(model.encoder)
        with self.assertRaisesRegex(ValueError, "some projections quantized and others not"):
            model.get_config()
        _quantized(model)  # the rest: the classifier's head
        self.assertEqual(model.get_config()["quantization_mode"], "int8")


class ExportTest(tf.test.TestCase):

    @pytest.mark.long
    def test_raw_text_savedmodel_of_int8_classifier(self):
        folder = tiny_folder(Path(self.create_tempdir().full_path))
        tokenizer = FullTokenizer(str(folder / "vocab.txt"))
        model = _quantized(BertClassifier(tiny_config(), num_labels=3))
        texts = tf.constant(["the film was great", "a dull plot", "the cat sat on the mat"])
        path = export_classifier(model, tokenizer, 16, ["neg", "neutral", "pos"], pair=False,
                                 path=os.path.join(self.create_tempdir().full_path, "served"))
        loaded = tf.saved_model.load(path)
        served = loaded.signatures["serving_default"](text_a=texts)["probabilities"]
        in_process = ClassifierServing(model, tokenizer, 16, ["neg", "neutral", "pos"])
        expected = in_process.serve_single(texts)["probabilities"]
        self.assertAllClose(served, expected, rtol=_ROUNDING, atol=_ROUNDING)
        self.assertTrue(any(variable.dtype == tf.int8 for variable in loaded.model_weights))


if __name__ == "__main__":
    tf.test.main()
