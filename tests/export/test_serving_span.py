"""The QA SavedModel reads a long context in the runner's `doc_stride` windows.

A tiny model cannot be relied on to find an answer, so the exported model
here is a stand-in whose logits peak on one word's piece wherever a window
holds it in the context: the answer can only come from a window past the
first one. (`test_span_answers_agree` holds the SavedModel to the runner on
a real tiny model, over many windows.)
"""

import keras
import pytest
import tensorflow as tf

from export.serving_span import SpanServing, export_span_model
from modeling import load_tokenizer
from tasks.squad import SquadTask
from tests.export.exported_models import without_graph_rewrites
from tests.fixtures import TestCase
from tests.modeling.tiny_folder import tiny_folder

LENGTH = 24
FILLER = "the cat sat on the mat . " * 6  # 42 pieces: several windows of LENGTH
CONTEXT = FILLER + "John lives in Paris, the film was dull."


class PeakOn(keras.Model):
    """Start and end logits 10 on `piece` in the context (segment 1), 0 elsewhere."""

    def __init__(self, piece: int):
        super().__init__()
        self.piece = piece

    def call(self, features, training=None):
        peak = tf.cast((features["input_ids"] == self.piece) & (features["segment_ids"] == 1),
                       tf.float32) * 10.0
        return {"start_logits": peak, "end_logits": peak}


class SpanServingWindowsTest(TestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        without_graph_rewrites(cls)
        cls.root = cls.class_folder()
        cls.tokenizer = load_tokenizer(tiny_folder(cls.root))

    def _check_answer_past_the_first_window(self, doc_stride: int) -> None:
        task = SquadTask(max_query_length=8, doc_stride=doc_stride)
        path = export_span_model(PeakOn(self.tokenizer.vocab["paris"]), self.tokenizer,
                                 LENGTH, task, str(self.root / f"peak_{doc_stride}"))
        served = tf.saved_model.load(path).signatures["serving_default"](
            question=tf.constant(["where does john live?"] * 3),
            context=tf.constant([CONTEXT, "john lives in paris", ""]))
        self.assertEqual(served["answer"].numpy().tolist(), [b"Paris", b"paris", b""],
                         msg=f"doc_stride={doc_stride}")
        start, end = served["start"].numpy().tolist(), served["end"].numpy().tolist()
        self.assertEqual(CONTEXT[start[0]:end[0]], "Paris")
        self.assertEqual((start[2], end[2]), (-1, -1))
        self.assertGreater(start[0], 24)  # past what one window of 24 positions holds

    def test_an_answer_past_the_first_window_is_found(self):
        self._check_answer_past_the_first_window(doc_stride=3)  # overlapping windows

    @pytest.mark.long
    def test_an_answer_past_the_first_window_is_found_with_the_default_stride(self):
        # Windows that do not overlap; each export costs ~10 s of tracing.
        self._check_answer_past_the_first_window(doc_stride=128)

    def test_a_query_limit_that_leaves_no_context_is_refused(self):
        with self.assertRaisesRegex(ValueError, r"max_query_length 21 leaves no room for the "
                                    r"context in 24 positions .*: at most 20"):
            SpanServing(PeakOn(0), self.tokenizer, LENGTH, 21, 30)
        with self.assertRaisesRegex(ValueError, "doc_stride must be a positive integer, got 0"):
            SpanServing(PeakOn(0), self.tokenizer, LENGTH, 8, 30, doc_stride=0)


if __name__ == "__main__":
    tf.test.main()
