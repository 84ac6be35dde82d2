"""`BertSpanModel.predict_answers` reads long contexts in the runner's `doc_stride` windows.

A tiny model cannot be relied on to find an answer, so the window mechanism
is tested with logits that peak on the answer's piece wherever the window
holds it: the model's `predict` is replaced by a function of the packed
windows it is given, which also records them, so they can be compared with
the runner's features for the same `doc_stride`.
"""

from unittest import mock

import numpy as np
import tensorflow as tf

from data_prep.datasets.squad import SquadExample
from data_prep.datasets.squad_features import convert_examples_to_features, features_to_arrays
from modeling import BertSpanModel, load_tokenizer
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder
from text.whitespace_words import whitespace_words

LENGTH = 24  # the default max_query_length is then LENGTH - 4, below the runner's 64
FILLER = "the cat sat on the mat . " * 6  # 42 pieces: several windows of LENGTH
LONG_CONTEXT = FILLER + "john lives in paris , the film was dull ."
QUESTION = "where does john live ?"


class PredictAnswersWindowsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.folder = tiny_folder(cls.class_folder())
        cls.model = BertSpanModel.from_pretrained(cls.folder, sequence_length=LENGTH)
        cls.tokenizer = load_tokenizer(cls.folder)

    def _peaking_on(self, word: str, seen: list):
        """A stand-in for `predict`: logits 10 on `word`'s context pieces, else 0."""
        piece = self.tokenizer.vocab[word]

        def predict(packed, batch_size=None, verbose=0):
            seen.append({key: np.asarray(value) for key, value in packed.items()})
            peak = np.where((packed["input_ids"] == piece) & (packed["segment_ids"] == 1),
                            10.0, 0.0).astype(np.float32)
            return {"start_logits": peak, "end_logits": peak.copy()}

        return predict

    def _runners_windows(self, contexts, doc_stride: int, max_query_length: int) -> dict:
        examples = [SquadExample(str(index), QUESTION, whitespace_words(context)[0])
                    for index, context in enumerate(contexts)]
        features = convert_examples_to_features(examples, self.tokenizer, LENGTH, doc_stride,
                                                max_query_length, False)
        return features_to_arrays(features)

    def test_an_answer_past_the_first_window_is_found(self):
        for doc_stride in (3, 7, 128):
            seen = []
            with mock.patch.object(self.model, "predict", self._peaking_on("paris", seen)):
                answers = self.model.predict_answers([QUESTION, QUESTION],
                                                     [LONG_CONTEXT, "john lives in paris"],
                                                     doc_stride=doc_stride)
            self.assertEqual(answers, ["paris", "paris"], msg=f"doc_stride={doc_stride}")
            windows = seen[0]["input_ids"]
            first_window = windows[0][windows[0] != 0].tolist()
            self.assertNotIn(self.tokenizer.vocab["paris"], first_window)
            # The windows are the runner's for the same doc_stride, in the same order.
            expected = self._runners_windows([LONG_CONTEXT, "john lives in paris"], doc_stride,
                                             LENGTH - 4)
            for key in ("input_ids", "input_mask", "segment_ids"):
                self.assertAllEqual(seen[0][key], expected[key], msg=key)
            self.assertGreater(len(windows), 3)

    def test_a_span_is_started_only_where_its_window_has_the_most_context(self):
        # "paris" sits in several windows at stride 1; the answer is found once, and the
        # window that scores it holds it with the most context (the runner's rule).
        seen = []
        with mock.patch.object(self.model, "predict", self._peaking_on("paris", seen)):
            self.assertEqual(self.model.predict_answers([QUESTION], [LONG_CONTEXT],
                                                        doc_stride=1), ["paris"])
        self.assertAllEqual(seen[0]["input_ids"],
                            self._runners_windows([LONG_CONTEXT], 1, LENGTH - 4)["input_ids"])

    def test_max_query_length_cuts_the_question_as_the_runner(self):
        seen = []
        with mock.patch.object(self.model, "predict", self._peaking_on("paris", seen)):
            self.assertEqual(self.model.predict_answers(
                [QUESTION], [LONG_CONTEXT], doc_stride=5, max_query_length=2), ["paris"])
        self.assertAllEqual(seen[0]["input_ids"],
                            self._runners_windows([LONG_CONTEXT], 5, 2)["input_ids"])

    def test_a_context_that_fits_is_one_window_packed_as_before(self):
        # Before windows, predict_answers read the preprocessor's packing of the pair: a
        # context that fits is still that one row, so its logits and answer are unchanged.
        questions = ["who sat?", "where does john live?", "what?"]
        contexts = ["the cat sat on the mat.", "John lives\u00a0in Paris!", ""]
        seen = []
        with mock.patch.object(self.model, "predict", self._peaking_on("cat", seen)):
            answers = self.model.predict_answers(questions, contexts)
        # Flat logits tie everywhere: the first start and end win, as in the runner.
        self.assertEqual(answers, ["cat", "John", ""])
        packed = next(iter(self.model.text_dataset((questions, contexts))))
        for key in packed:
            self.assertAllEqual(seen[0][key], packed[key], msg=key)
        # The real model too: its answers to contexts that fit come from that one window.
        answers = self.model.predict_answers(questions, contexts, max_answer_length=2)
        self.assertLen(answers, 3)
        self.assertIn(answers[0], "the cat sat on the mat.")

    def test_bad_window_arguments_are_refused_before_tensorflow_runs(self):
        cases = [({"doc_stride": 0}, "doc_stride must be a positive integer, got 0"),
                 ({"doc_stride": 2.5}, "doc_stride must be a positive integer, got 2.5"),
                 ({"max_query_length": 21},
                  "max_query_length=21 leaves no room for the context in sequence_length=24 "
                  r"positions \(\[CLS\] question \[SEP\] context \[SEP\]\): give at most 20"),
                 ({"max_query_length": 0}, "max_query_length must be a positive integer")]
        for kwargs, message in cases:
            with mock.patch.object(tf, "constant", side_effect=AssertionError("TF ran")), \
                    self.assertRaisesRegex(ValueError, message):
                self.model.predict_answers([QUESTION], [LONG_CONTEXT], **kwargs)


if __name__ == "__main__":
    tf.test.main()
