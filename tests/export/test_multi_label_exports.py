"""A multi-label run's folder exports multi-label: raw text, TF Serving's ids, Hugging Face.

The folder is what `run_classifier.py --multi_label` leaves (`write_model_folder`):
its checkpoint, `labels.txt` and `model_settings.json`. Every export reads it
through `export_model`, as `export_model.py --source=<run folder>` does.
"""

import json

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the raw-text SavedModel's ops)

from export.model_exports import export_model
from modeling.classifier import BertClassifier
from network.config import BertConfig
from network.model_folder import write_model_folder
from tests.fixtures import TINY_CONFIG, TestCase
from tests.modeling.tiny_folder import tiny_folder

LABELS = ["film", "neg", "pos"]
TEXTS = ["the film was unbelievable", "a dull plot", "john lives in paris"]
THRESHOLD = 0.4


@pytest.mark.long
class MultiLabelExportTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        source = tiny_folder(cls.root, "source")
        keras.utils.set_random_seed(5)
        # Large weights, so the probabilities spread on both sides of the threshold.
        config = BertConfig.from_dict({**TINY_CONFIG, "initializer_range": 0.5})
        model = BertClassifier(config, num_labels=3, multi_label=True, threshold=THRESHOLD)
        cls.run_folder = cls.root / "run"
        cls.run_folder.mkdir()
        write_model_folder(cls.run_folder, task_model=model, config=config,
                           vocabulary=str(source / "vocab.txt"), labels=LABELS)
        cls.reloaded = BertClassifier.from_pretrained(cls.run_folder, sequence_length=16)
        cls.logits = cls.reloaded.predict(TEXTS, verbose=0)

    def test_the_raw_text_saved_model_answers_label_sets_at_the_runs_threshold(self):
        out = export_model(self.run_folder, self.root / "saved", "saved_model", sequence_length=16)
        outputs = tf.saved_model.load(str(out)).signatures["serving_default"](
            text_a=tf.constant(TEXTS))
        probabilities = 1 / (1 + np.exp(-self.logits))
        self.assertAllClose(outputs["probabilities"], probabilities, atol=1e-5)
        self.assertAllEqual(outputs["predicted"], probabilities > THRESHOLD)
        self.assertTrue(0 < np.sum(probabilities > THRESHOLD) < probabilities.size)

    def test_the_numeric_model_gives_a_sigmoid_per_label(self):
        out = export_model(self.run_folder, self.root / "serving", "tf_serving", sequence_length=16)
        preprocess = tf.saved_model.load(str(out / "preprocess"))
        ids = preprocess.signatures["serving_default"](text_a=tf.constant(TEXTS))
        outputs = tf.saved_model.load(str(out / "model" / "1")).signatures["serving_default"](
            **ids)
        probabilities = 1 / (1 + np.exp(-self.logits))
        self.assertAllClose(outputs["logits"], self.logits, atol=1e-5)
        self.assertAllClose(outputs["probabilities"], probabilities, atol=1e-5)
        self.assertAllEqual(outputs["predicted"], probabilities > THRESHOLD)

    def test_hugging_face_config_says_multi_label(self):
        out = export_model(self.run_folder, self.root / "hf", "huggingface")
        config = json.loads((out / "config.json").read_text())
        self.assertEqual(config["problem_type"], "multi_label_classification")
        self.assertEqual(config["id2label"], {"0": "film", "1": "neg", "2": "pos"})


if __name__ == "__main__":
    tf.test.main()
