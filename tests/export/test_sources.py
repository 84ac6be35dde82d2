"""Every export takes a model object, a `.keras` file or a folder (the issue's `sst.keras` case)."""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the TF Hub preprocessor's ops)

from export.model_exports import export_model
from export.sources import export_source
from modeling import BertClassifier, BertEncoder, export_tf_hub, load_config, load_encoder
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder

TEXTS = ["a great film", "the plot was dull"]


class ExportSourcesTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        root = cls.class_folder()
        cls.folder = tiny_folder(root)
        cls.model = BertClassifier.from_pretrained(cls.folder, num_labels=2, sequence_length=16,
                                                   label_names=["neg", "pos"])
        cls.model.compile()
        # The encoder moved away from the folder's, as fine-tuning moves it (without training:
        # the exports read the weights, whatever changed them).
        generator = np.random.default_rng(0)
        for weight in cls.model.encoder.trainable_weights:
            weight.assign(weight + generator.normal(0, 0.02, weight.shape).astype("float32"))
        cls.keras_file = root / "sst.keras"
        cls.model.save(cls.keras_file)

    def _packed(self):
        return self.model.preprocessor(tf.constant(TEXTS))

    @pytest.mark.long
    def test_tf_hub_export_of_a_keras_file(self):
        # The case; a model object takes the same path (`export_source`).
        expected = self.model.encoder(self._packed(), training=False)["pooled_output"]
        out = self.tmp_path() / "hub"
        export_tf_hub(str(self.keras_file), out, sequence_length=16)
        preprocess = tf.saved_model.load(str(out / "preprocess"))
        encoder = tf.saved_model.load(str(out / "encoder"))
        inputs = preprocess(tf.constant(TEXTS))
        self.assertAllEqual(inputs["input_word_ids"], self._packed()["input_ids"])
        self.assertAllClose(encoder(inputs)["pooled_output"], expected, atol=1e-5, rtol=0)

    def test_google_and_huggingface_exports_of_a_keras_file(self):
        expected = self.model.encoder(self._packed(), training=False)["pooled_output"]
        for format_name in ("google", "huggingface"):
            out = self.tmp_path() / format_name
            export_model(self.keras_file, out, format_name)
            self.assertEqual((out / "vocab.txt").read_text().splitlines(),
                             self.model.preprocessor.vocabulary)
            self.assertAllClose(load_encoder(out)(self._packed(), training=False)["pooled_output"],
                                expected, atol=1e-5, rtol=0)

    @pytest.mark.long
    def test_a_folder_with_a_fine_tuned_head_is_that_task_model(self):
        saved = self.tmp_path() / "run"
        export_model(self.model, saved, "google")
        (saved / "labels.txt").write_text("neg\npos\n")
        loaded = export_source(saved)
        self.assertIsInstance(loaded.model, BertClassifier)
        self.assertEqual(loaded.model.label_names, ["neg", "pos"])
        packed = self._packed()
        self.assertAllClose(loaded.model(packed, training=False),
                            self.model(packed, training=False), atol=1e-5, rtol=0)

    def test_what_names_no_model_is_refused_by_argument(self):
        out = self.tmp_path() / "out"
        bare = BertEncoder(load_config(self.folder))
        not_ours = keras.Sequential([keras.Input((4,)), keras.layers.Dense(2)])
        cases = [(lambda: export_tf_hub(3, out), TypeError, "source must be"),
                 (lambda: export_model(out.parent / "none.keras", out, "google"),
                  FileNotFoundError, "source .*none.keras.*: no such .keras file"),
                 (lambda: export_model(not_ours, out, "google"), TypeError,
                  "source must be a model of this project"),
                 (lambda: export_model(bare, out, "huggingface"), ValueError,
                  "BertEncoder has no preprocessor, so no vocabulary for the huggingface export")]
        for call, error, message in cases:
            with self.assertRaisesRegex(error, message):
                call()
            self.assertFalse(out.exists())
