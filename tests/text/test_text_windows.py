"""A 2,000-word text read whole: classified by its windows' mean, every word tagged."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from export.serving_tagging import export_tagger
from modeling import BertClassifier, BertTokenTagger
from tests.fixtures import TestCase
from tests.modeling.test_text_tasks import TAG_NAMES
from tests.modeling.tiny_folder import WORDS, tiny_folder

LENGTH = 16  # windows of 14 sub-tokens, 7 apart by default


def _long_words(count: int = 2000, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [str(word) for word in rng.choice([w for w in WORDS if not w.startswith("#")], count)]


class ClassifierWindowsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())
        keras.utils.set_random_seed(1)
        cls.model = BertClassifier.from_pretrained(cls.folder, num_labels=2,
                                                   sequence_length=LENGTH, long_texts="windows")
        cls.texts = [" ".join(_long_words()), "a fine film"]

    def _by_hand(self, text: str, stride: int = 7) -> np.ndarray:
        """The mean of the logits of `[CLS] window [SEP]` rows, windows as the runner's."""
        tokenizer = self.model.preprocessor.tokenizer
        ids = tokenizer([text]).to_list()[0]
        capacity = LENGTH - 2
        starts = list(range(0, len(ids) - capacity, stride)) + [max(len(ids) - capacity, 0)]
        rows = [[tokenizer.cls_id, *ids[start:start + capacity], tokenizer.sep_id]
                for start in starts]
        packed = {"input_ids": np.array([row + [0] * (LENGTH - len(row)) for row in rows],
                                        np.int32)}
        packed["input_mask"] = (packed["input_ids"] > 0).astype(np.int32)
        packed["segment_ids"] = np.zeros_like(packed["input_ids"])
        return np.mean(self.model(packed, training=False).numpy(), axis=0), len(starts)

    def test_a_long_text_is_the_mean_of_its_windows_logits(self):
        logits = self.model.predict(self.texts, verbose=0)
        self.assertEqual(logits.shape, (2, 2))
        expected, windows = self._by_hand(self.texts[0])
        self.assertGreater(windows, 250)  # 2,000 words, one sub-token each, 7 per stride
        self.assertAllClose(logits[0], expected)
        self.assertAllClose(logits[1], self._by_hand(self.texts[1])[0])
        self.assertLen(self.model.predict_labels(self.texts), 2)

    @pytest.mark.long
    @pytest.mark.slow
    def test_fit_trains_each_window_with_its_texts_label_and_evaluate_reads_the_mean(self):
        features, labels, weights = next(iter(self.model.text_dataset(
            self.texts, [1, 0], sample_weight=[2.0, 3.0], call="fit", batch_size=2)))
        windows = self._by_hand(self.texts[0])[1]
        self.assertEqual(features["input_ids"].shape, (windows + 1, LENGTH))
        self.assertNotIn("example_windows", features)
        self.assertAllEqual(labels, [1] * windows + [0])
        self.assertAllEqual(weights, [2.0] * windows + [3.0])
        self.model.compile()
        history = self.model.fit(self.texts, [1, 0], epochs=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))
        logits = self.model.predict(self.texts, verbose=0)
        loss = self.model.evaluate(self.texts, [1, 0], verbose=0, return_dict=True)["loss"]
        self.assertAllClose(loss, keras.losses.SparseCategoricalCrossentropy(from_logits=True)(
            np.array([1, 0]), logits))

    def test_bad_settings_are_refused_by_name(self):
        cases = [({"long_texts": "slide"}, "long_texts must be 'truncate' .* or 'windows' "
                                           r".*, got 'slide'"),
                 ({"long_texts": "windows", "window_stride": 0},
                  "window_stride must be a positive integer"),
                 ({"window_stride": 4}, "window_stride=4 needs long_texts='windows'"),
                 ({"long_texts": "windows", "window_stride": 15},
                  "window_stride=15 is wider than a window of sequence_length=16 "
                  r"\(14 sub-tokens"),
                 ({"long_texts": "windows", "both_orders": True, "causal": True},
                  "a both_orders model takes packed pairs")]
        for settings, message in cases:
            with self.assertRaisesRegex(ValueError, message):
                BertClassifier.from_pretrained(self.folder, num_labels=2,
                                               sequence_length=LENGTH, **settings)
        with self.assertRaisesRegex(ValueError, "reads single texts through windows, not "
                                                "pairs"):
            self.model.predict((["a film"], ["a cat"]), verbose=0)


class TaggerWindowsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)
        keras.utils.set_random_seed(2)
        cls.model = BertTokenTagger.from_pretrained(cls.folder, num_labels=3,
                                                    sequence_length=LENGTH,
                                                    label_names=TAG_NAMES)
        # "unbelievable" is three sub-tokens, so words and windows do not line up.
        cls.sentences = [_long_words(), ["the", "cat", "sat"], ["unbelievable"] * 9]

    @pytest.mark.long
    def test_every_word_of_a_2000_word_sentence_is_tagged_in_python_and_the_saved_model(self):
        tags = self.model.predict_labels(self.sentences)
        self.assertEqual([len(row) for row in tags], [2000, 3, 9])
        self.assertContainsSubset({tag for row in tags for tag in row}, set(TAG_NAMES))
        logits = self.model.predict(self.sentences, verbose=0)
        self.assertEqual(logits.shape, (3, 2000, 3))
        self.assertAllEqual(logits[1, 3:], np.zeros((1997, 3)))  # past the sentence's end
        path = export_tagger(self.model, self.model.preprocessor.tokenizer, LENGTH, TAG_NAMES,
                             str(self.root / "tagger"))
        served = tf.saved_model.load(path).signatures["tag_words"](words=tf.constant(
            [row + [""] * (2000 - len(row)) for row in self.sentences]))["tags"].numpy()
        for row, words in enumerate(self.sentences):
            self.assertEqual([tag.decode() for tag in served[row][:len(words)]], tags[row])

    @pytest.mark.long
    def test_fit_trains_every_words_tag_once(self):
        flat = [index % 3 for row in self.sentences for index, _ in enumerate(row)]
        rows = np.cumsum([0] + [len(row) for row in self.sentences])
        tag_ids = [flat[rows[k]:rows[k + 1]] for k in range(len(self.sentences))]
        _, labels, weights = next(iter(self.model.text_dataset(
            self.sentences, tag_ids, call="fit", batch_size=3)))
        # Windows follow each other in word order, so the labelled positions read in order
        # are the words' tags: each word trained once, none left out.
        self.assertAllEqual(tf.boolean_mask(labels, weights > 0), flat)
        self.model.compile()
        history = self.model.fit(self.sentences, tag_ids, epochs=1, verbose=0)
        self.assertTrue(np.isfinite(history.history["loss"][0]))

    def test_a_bad_stride_is_refused_by_name(self):
        for stride, message in ((0, "window_stride must be a positive integer"),
                                (20, "window_stride=20 is wider than a window")):
            with self.assertRaisesRegex(ValueError, message):
                BertTokenTagger.from_pretrained(self.folder, num_labels=3,
                                                sequence_length=LENGTH, window_stride=stride)
