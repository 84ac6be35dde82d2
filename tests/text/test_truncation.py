"""What the window of `sequence_length` tokens cuts is counted and logged once per call."""

import keras
import pytest
import tensorflow as tf

from modeling import BertClassifier, BertSpanModel, BertTokenTagger
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder

# Each word of the tiny vocabulary is one token; "unbelievable" is un ##believ ##able.
TEXTS = ["a fine film", "the film is great", "great acting", "the plot was dull and boring"]
SENTENCES = [["john", "lives", "in", "paris"], ["the", "cat", "sat"], ["unbelievable", "!"]]


class TruncationTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())
        # Five positions: [CLS], three tokens, [SEP].
        cls.classifier = BertClassifier.from_pretrained(cls.folder, num_labels=2,
                                                        sequence_length=5)
        cls.tagger = BertTokenTagger.from_pretrained(cls.folder, num_labels=2,
                                                     sequence_length=5)

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(0)

    def _warnings(self, call) -> list[str]:
        with self.assertLogs("absl", "WARNING") as logs:
            call()
        return [record.getMessage() for record in logs.records]

    @pytest.mark.slow
    def test_texts_longer_than_the_window_are_counted_for_each_call(self):
        messages = self._warnings(lambda: self.classifier.predict(TEXTS, verbose=0))
        self.assertEqual(messages, ["predict: 2 of 4 texts are longer than sequence_length=5 "
                                    "tokens and were cut to it"])
        # predict_labels reports once, through predict.
        self.assertLen(self._warnings(lambda: self.classifier.predict_labels(TEXTS)), 1)
        # What fit counts, not how it trains: eager steps spare tracing the training step.
        self.classifier.compile(run_eagerly=True)
        messages = self._warnings(lambda: self.classifier.fit(
            TEXTS, [0, 1, 0, 1], validation_data=(TEXTS[:2], [0, 1]), verbose=0))
        self.assertEqual(messages, [
            "fit: 2 of 4 texts are longer than sequence_length=5 tokens and were cut to it",
            "fit validation_data: 1 of 2 texts are longer than sequence_length=5 tokens and "
            "were cut to it"])

    def test_pairs_count_their_tokens_together(self):
        # [CLS] a [SEP] b [SEP] leaves two positions: "a" + "film" fits, "a fine" + "film" not.
        pairs = (["a", "a fine", "great"], ["film", "film", ""])
        messages = self._warnings(lambda: self.classifier.predict(pairs, verbose=0))
        self.assertEqual(messages, ["predict: 1 of 3 text pairs are longer than "
                                    "sequence_length=5 tokens and were cut to it"])

    def test_nothing_is_logged_when_everything_fits(self):
        with self.assertNoLogs("absl", "WARNING"):
            self.classifier.predict(["a fine film", "great acting"], verbose=0)

    def test_windows_cut_nothing_so_log_nothing(self):
        # Sentences and texts longer than three sub-tokens are read through windows.
        windowed = BertClassifier.from_pretrained(self.folder, num_labels=2, sequence_length=5,
                                                  long_texts="windows")
        with self.assertNoLogs("absl", "WARNING"):
            windowed.predict(TEXTS, verbose=0)
            tags = self.tagger.predict_labels(SENTENCES)
        self.assertEqual([len(row) for row in tags], [4, 3, 2])
        self.assertNotIn(None, [tag for row in tags for tag in row])

    def test_span_model_counts_the_contexts_cut(self):
        model = BertSpanModel.from_pretrained(self.folder, sequence_length=9)
        # [CLS] who sat ? [SEP] and [SEP] leave three positions for the context.
        # A lone U+3000 is a word of no token: it takes no position, as in the runner.
        questions, contexts = ["who sat?", "who sat?"], ["the cat \u3000 sat",
                                                         "the cat sat on the mat"]
        messages = self._warnings(lambda: model.predict((questions, contexts), verbose=0))
        self.assertEqual(messages, ["predict: 1 of 2 questions with their contexts are longer "
                                    "than sequence_length=9 tokens: the contexts' ends were "
                                    "cut, and predict_answers reads them whole, in "
                                    "doc_stride windows"])
        # predict_answers reads the whole context in windows: nothing is cut.
        with self.assertNoLogs("absl", "WARNING"):
            self.assertLen(model.predict_answers(questions, contexts, doc_stride=2), 2)


if __name__ == "__main__":
    tf.test.main()
