"""A classifier built with long_texts="windows" is exported reading long texts as its predict does.

The raw-text SavedModel averages the logits of a text's windows; TF Serving's
split gives the windows' ids with `window_row`, and the mean of the numeric
model's logits over a text's rows is its logits. A truncating classifier's
exports keep one row per text.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the raw-text SavedModel's ops)

from export.model_exports import export_model
from export.serving import export_classifier
from modeling import BertClassifier
from tests.modeling.tiny_folder import WORDS, TinyFolderTestCase

LENGTH = 16  # windows of 14 sub-tokens
STRIDE = 5
LABELS = ["neg", "neutral", "pos"]


def _texts() -> list[str]:
    rng = np.random.default_rng(0)
    words = [word for word in WORDS if not word.startswith("#")]
    return [" ".join(rng.choice(words, 60)), "a fine film", "", " ".join(rng.choice(words, 30))]


def _softmax(logits: np.ndarray) -> np.ndarray:
    exponentials = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return exponentials / exponentials.sum(axis=-1, keepdims=True)


class ClassifierWindowsServingTest(TinyFolderTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.texts = _texts()
        keras.utils.set_random_seed(2)
        # A wide head, so the logits of different windows differ visibly.
        cls.windowed = BertClassifier.from_pretrained(
            cls.folder, num_labels=3, label_names=LABELS, sequence_length=LENGTH,
            long_texts="windows", window_stride=STRIDE, initializer_range=0.5)
        cls.truncating = BertClassifier.from_pretrained(
            cls.folder, num_labels=3, label_names=LABELS, sequence_length=LENGTH,
            initializer_range=0.5)

    def _serving(self, model, name: str):
        out = export_model(model, self.root / name, "tf_serving")
        return (tf.saved_model.load(str(out / "raw_text")),
                tf.saved_model.load(str(out / "preprocess")),
                tf.saved_model.load(str(out / "model" / "1")))

    @pytest.mark.long
    def test_a_windowed_classifiers_exports_give_its_predict_logits(self):
        logits = self.windowed.predict(self.texts, verbose=0)
        tokens = self.windowed.preprocessor.tokenizer(self.texts[:1]).row_lengths()[0]
        self.assertGreater(int(tokens), 3 * LENGTH)  # several windows long
        raw_text, preprocess, numeric = self._serving(self.windowed, "windowed")
        self.assertEqual(set(raw_text.signatures), {"serve_single", "serving_default"})
        outputs = raw_text.signatures["serving_default"](text_a=tf.constant(self.texts))
        self.assertAllClose(outputs["probabilities"], _softmax(logits), atol=1e-5)
        self.assertAllEqual(outputs["label"],
                            [LABELS[index].encode() for index in logits.argmax(-1)])
        ids = preprocess.signatures["serving_default"](text_a=tf.constant(self.texts))
        rows = ids.pop("window_row").numpy()
        self.assertGreater(len(rows), 10)
        self.assertEqual(sorted(set(rows)), [0, 1, 2, 3])
        window_logits = numeric.signatures["serving_default"](**ids)["logits"].numpy()
        means = np.stack([window_logits[rows == text].mean(axis=0)
                          for text in range(len(self.texts))])
        self.assertAllClose(means, logits, atol=1e-5)

    @pytest.mark.long
    def test_a_truncating_classifiers_exports_keep_one_row_per_text(self):
        logits = self.truncating.predict(self.texts, verbose=0)
        raw_text, preprocess, numeric = self._serving(self.truncating, "truncating")
        self.assertEqual(set(raw_text.signatures),
                         {"serve_single", "serve_pair", "serving_default"})
        outputs = raw_text.signatures["serving_default"](text_a=tf.constant(self.texts))
        self.assertAllClose(outputs["probabilities"], _softmax(logits), atol=1e-5)
        ids = preprocess.signatures["serving_default"](text_a=tf.constant(self.texts))
        self.assertEqual(set(ids), {"input_ids", "input_mask", "segment_ids"})
        self.assertAllClose(numeric.signatures["serving_default"](**ids)["logits"], logits,
                            atol=1e-5)

    def test_a_pair_signature_of_a_windowed_classifier_is_refused(self):
        out = self.root / "pair"
        with self.assertRaisesRegex(ValueError, "long_texts='windows'.*no pair signature"):
            export_classifier(self.windowed, self.windowed.preprocessor.tokenizer, LENGTH,
                              LABELS, True, str(out))
        self.assertFalse(out.exists())


if __name__ == "__main__":
    tf.test.main()
