"""`BertSpanModel` reads long contexts in the runner's `doc_stride` windows, and fits raw text.

A tiny model cannot be relied on to find an answer, so the window mechanism
is tested with logits that peak on the answer's piece wherever the window
holds it: the model's `predict` is replaced by a function of the packed
windows it is given, which also records them, so they can be compared with
the runner's features for the same `doc_stride`.
"""

from unittest import mock

import json

import keras
import numpy as np
import pytest
import tensorflow as tf

from data_prep.datasets.squad import SquadExample, read_squad_examples
from data_prep.datasets.squad_features import convert_examples_to_features, features_to_arrays
from modeling import BertSpanModel, load_tokenizer
from modeling.losses import span_loss
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


QUESTIONS = ["where does john live?", "who sat on the mat?", "what was dull?"]
CONTEXTS = [FILLER + "John lives in Paris.", "The cat sat on the mat.",
            "the film was dull, the plot was boring."]
# SQuAD's JSON answer, or a (text, answer_start) pair.
ANSWERS = [{"text": "Paris", "answer_start": CONTEXTS[0].index("Paris")}, ("cat", 4),
           {"text": "the film", "answer_start": 0}]


class FitAnswersTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.folder = tiny_folder(cls.root)
        cls.tokenizer = load_tokenizer(cls.folder)

    def setUp(self):
        super().setUp()
        keras.utils.set_random_seed(1)
        self.model = BertSpanModel.from_pretrained(self.folder, sequence_length=LENGTH)

    def test_training_windows_and_targets_are_the_runners(self):
        inputs, targets = self.model.preprocessor.text_columns((QUESTIONS, CONTEXTS), ANSWERS)
        squad = self.root / "train.json"
        squad.write_text(json.dumps({"data": [{"paragraphs": [
            {"context": context, "qas": [{"id": str(index), "question": question, "answers": [
                answer if isinstance(answer, dict) else
                {"text": answer[0], "answer_start": answer[1]}]}]}
            for index, (question, context, answer) in enumerate(zip(QUESTIONS, CONTEXTS,
                                                                     ANSWERS))]}]}))
        examples, _ = read_squad_examples(str(squad), True, False)
        expected = features_to_arrays(convert_examples_to_features(
            examples, self.tokenizer, LENGTH, 128, LENGTH - 4, True))
        for key in ("input_ids", "input_mask", "segment_ids"):
            self.assertAllEqual(inputs[key], expected[key], msg=key)
        self.assertAllEqual(targets["start_logits"], expected["start_positions"])
        self.assertAllEqual(targets["end_logits"], expected["end_positions"])
        # Windows without the answer point at [CLS]; the one holding "Paris" at its piece.
        starts = targets["start_logits"].numpy()
        self.assertIn(0, starts[:-2])
        window = int(np.flatnonzero(starts[:-2])[-1])
        self.assertEqual(inputs["input_ids"][window][starts[window]],
                         self.tokenizer.vocab["paris"])

    def test_compile_gives_the_runners_span_loss(self):
        self.model.compile()
        inputs, targets = self.model.preprocessor.text_columns((QUESTIONS, CONTEXTS), ANSWERS)
        loss = self.model.evaluate((QUESTIONS, CONTEXTS), ANSWERS, verbose=0, return_dict=True)
        outputs = self.model(inputs, training=False)
        expected = span_loss({"start_positions": targets["start_logits"],
                              "end_positions": targets["end_logits"]}, outputs)["loss"]
        self.assertAllClose(loss["loss"], expected, rtol=1e-5)

    @pytest.mark.slow
    def test_fit_lowers_the_loss_and_then_finds_the_answers(self):
        self.model.compile(learning_rate=1e-3)
        history = self.model.fit((QUESTIONS, CONTEXTS), ANSWERS, epochs=40, batch_size=4,
                                 verbose=0)
        losses = history.history["loss"]
        self.assertLess(losses[-1], losses[0] / 5)
        self.assertEqual(self.model.predict_answers(QUESTIONS, CONTEXTS),
                         ["Paris", "cat", "the film"])

    def test_bad_answers_are_refused_before_tensorflow_runs(self):
        self.model.compile()
        cases = [
            ([ANSWERS[0], ("cat", 40), ANSWERS[2]],
             r"y\[1\]: answer_start=40 is outside context 1 \(23 characters\) for an answer "
             "of 3: give the offset of its first character, from 0"),
            ([ANSWERS[0], ("cat", -1), ANSWERS[2]], r"y\[1\]: answer_start=-1 is outside"),
            ([ANSWERS[0], ANSWERS[1], {"text": "the plot", "answer_start": 0}],
             r"y\[2\]: the answer 'the plot' is not at answer_start=0 in context 2, which "
             "reads 'the film' there"),
            ([ANSWERS[0], ANSWERS[1], ("", 0)], r"y\[2\]: the answer text is ''"),
            ([ANSWERS[0], "cat", ANSWERS[2]], r"y\[1\] is 'cat': give each answer as"),
            (ANSWERS[:2], "y holds 2 answers for 3 contexts"),
        ]
        for answers, message in cases:
            with mock.patch.object(tf, "constant", side_effect=AssertionError("TF ran")), \
                    self.assertRaisesRegex(ValueError, message):
                self.model.fit((QUESTIONS, CONTEXTS), answers, verbose=0)


if __name__ == "__main__":
    tf.test.main()
