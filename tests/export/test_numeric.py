"""The numeric SavedModel of every task model: the model's own outputs, by name, on int32 ids."""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from export.numeric import save_numeric
from modeling import (BertClassifier, BertEncoder, BertMultipleChoice, BertSpanModel,
                      BertTextEmbedder, BertTokenTagger)
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import TestCase, tiny_config

CASES = (
    ("encoder", BertEncoder, {}, (3, 12), ["pooled_output", "sequence_output"]),
    ("regression", BertClassifier, {"num_labels": 1}, (3, 12), ["logits"]),
    ("tagger", BertTokenTagger, {"num_labels": 4}, (3, 12), ["logits", "probabilities"]),
    ("multiple_choice", BertMultipleChoice, {}, (2, 4, 12), ["logits"]),
)
# The rest of the kinds: their serving functions' outputs are also checked in-process, against
# LiteRT, by tests/export/test_tflite.py's TaskModelTfliteTest.
LONG_CASES = (
    ("span", BertSpanModel, {}, (3, 12), ["end_logits", "start_logits"]),
    ("embedder", BertTextEmbedder, {"pooling": ["mean", "max"], "normalize": True}, (3, 12),
     ["embedding"]),
)


class NumericExportTest(TestCase, parameterized.TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        without_graph_rewrites(cls)

    @parameterized.named_parameters(*CASES)
    def test_outputs_are_the_models(self, model_class, kwargs, shape, names):
        self._check_outputs_are_the_models(model_class, kwargs, shape, names)

    @parameterized.named_parameters(*LONG_CASES)
    @pytest.mark.long
    def test_outputs_are_the_models_of_the_other_kinds(self, model_class, kwargs, shape, names):
        self._check_outputs_are_the_models(model_class, kwargs, shape, names)

    def _check_outputs_are_the_models(self, model_class, kwargs, shape, names):
        keras.utils.set_random_seed(5)
        model = model_class(tiny_config(initializer_range=0.5), **kwargs)
        rng = np.random.default_rng(0)
        ids = {"input_ids": rng.integers(5, 60, shape).astype(np.int32),
               "input_mask": np.ones(shape, np.int32),
               "segment_ids": np.zeros(shape, np.int32)}
        ids["input_mask"][..., -4:] = 0
        folder = self.tmp_path() / "model" / "1"
        save_numeric(model, str(folder))
        loaded = tf.saved_model.load(str(folder))
        served = loaded.signatures["serving_default"](**ids)
        self.assertEqual(sorted(served), names)
        expected = model(ids, training=False)
        if not isinstance(expected, dict):
            expected = {names[0]: expected}
        if "probabilities" in names:
            expected["probabilities"] = tf.nn.softmax(expected["logits"], axis=-1)
        for name in names:
            self.assertEqual(served[name].dtype, tf.float32)
            self.assertAllClose(served[name], expected[name], atol=1e-5, rtol=0)


if __name__ == "__main__":
    tf.test.main()
