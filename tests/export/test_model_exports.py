"""SavedModels on raw text from any model: a `.keras` file, a model object, a folder."""

import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the tokenizer's ops the SavedModels use)

from export.model_exports import export_model
from modeling import (BertClassifier, BertEncoder, BertTextEmbedder, BertTokenTagger,
                      load_config)
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import GOLDEN, TestCase
from tests.modeling.test_text_embedder import sentence_transformers_folder
from tests.modeling.tiny_folder import tiny_folder
from tests.reference_python import minilm_or_skip

TEXTS = ["a great film", "the plot was dull , boring", "who ?"]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat", "sat"]]


class RawTextSavedModelsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        without_graph_rewrites(cls)

    def test_a_classifier_keras_file_serves_its_probabilities_and_labels(self):
        model = BertClassifier.from_pretrained(tiny_folder(self.tmp_path()), num_labels=2,
                                               sequence_length=16, label_names=["neg", "pos"])
        keras_file = self.tmp_path() / "sst.keras"
        model.save(keras_file)
        out = self.tmp_path() / "served"
        export_model(keras_file, out, "saved_model")
        served = tf.saved_model.load(str(out)).signatures["serving_default"](
            text_a=tf.constant(TEXTS))
        self.assertAllClose(served["probabilities"], tf.nn.softmax(model.predict(TEXTS)),
                            atol=1e-5, rtol=0)
        self.assertEqual([label.decode() for label in served["label"].numpy()],
                         model.predict_labels(TEXTS))
        self.assertEqual((out / "labels.txt").read_text(), "neg\npos\n")

    @pytest.mark.long
    def test_a_tagger_object_serves_its_tags(self):
        model = BertTokenTagger.from_pretrained(tiny_folder(self.tmp_path()), num_labels=3,
                                                sequence_length=16,
                                                label_names=["O", "B-PER", "B-LOC"])
        out = self.tmp_path() / "served"
        export_model(model, out, "saved_model")
        served = tf.saved_model.load(str(out)).signatures["serving_default"](
            sentence=tf.constant([" ".join(words) for words in SENTENCES]))
        tags = [[tag.decode() for tag in row if tag] for row in served["tags"].numpy()]
        self.assertEqual(tags, model.predict_labels(SENTENCES))

    @pytest.mark.long
    def test_an_embedder_folder_serves_its_vectors(self):
        folder = sentence_transformers_folder(self.tmp_path(),
                                              {"pooling_mode": ["cls", "mean"]})
        out = self.tmp_path() / "embedder"
        export_model(folder, out, "embedder")
        served = tf.saved_model.load(str(out)).signatures["serving_default"](
            text=tf.constant(TEXTS))["embedding"]
        expected = BertTextEmbedder.from_pretrained(folder).predict(TEXTS)
        self.assertAllClose(served, expected, atol=1e-5, rtol=0)

    @pytest.mark.long
    @pytest.mark.assets
    def test_the_real_minilm_embedder_serves_sentence_transformers_vectors(self):
        folder = minilm_or_skip(self)
        golden = np.load(GOLDEN / "minilm_sentence_embeddings.npz")
        out = self.tmp_path() / "minilm"
        export_model(folder, out, "embedder")
        served = tf.saved_model.load(str(out)).signatures["serving_default"](
            text=tf.constant(json.loads(str(golden["texts"]))))["embedding"]
        self.assertAllClose(served, golden["folder"], atol=1e-5, rtol=0)

    def test_a_model_without_a_served_task_is_refused_before_writing(self):
        folder = tiny_folder(self.tmp_path())
        out = self.tmp_path() / "refused"
        with self.assertRaisesRegex(ValueError, "a BertEncoder has no SavedModel on raw text"):
            export_model(BertEncoder(load_config(folder)), out, "saved_model")
        with self.assertRaisesRegex(ValueError, "format_name must be one of google, "
                                                "huggingface, tf_hub, saved_model, embedder"):
            export_model(folder, out, "onnx")
        self.assertFalse(out.exists())
