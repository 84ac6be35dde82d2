"""text.answer_spans: the original's span search and final text, and their graph twins."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from text import answer_spans

FINAL_TEXTS = [
    ("steve smith", "Steve Smith's", True, "Steve Smith"),
    ("Steve Smith", "Steve Smith's", False, "Steve Smith"),
    ("steve smith", "Steve Smith's", False, "Steve Smith's"),  # case matters when cased
    ("1990", "(1990)", True, "1990"),
    ("cafe rouge", "Café Rouge.", True, "Café Rouge"),
    ("中 国", "北京是中国的首都。", True, "中国"),
    ("москва", "Москва —", True, "Москва"),
    ("paris", "Steve Smith's", True, "Steve Smith's"),  # not found: the whole original
    ("cafe", "Cafe\u0301", True, "Cafe\u0301"),  # NFD accent: lengths differ, no alignment
    # U+00A0 and U+3000 inside a word are spaces to the BasicTokenizer: no alignment.
    ("dollars", "5\u00a0dollars", True, "5\u00a0dollars"),
    ("is", "paris\u3000is big", True, "paris\u3000is big"),
    ("[UNK]", "zebra", True, "zebra"),  # a piece not in the words
    ("a", "Aa-a", True, "A"),  # the first place the text is found, as the original
    ("", "abc", True, "abc"),
    ("big", "a big\u00ad dog", True, "a big\u00ad dog"),  # a deleted soft hyphen: no alignment
]


class FinalTextTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.parameters(FINAL_TEXTS)
    def test_get_final_text(self, pred, orig, lower, expected):
        self.assertEqual(answer_spans.get_final_text(pred, orig, lower), expected)

    @parameterized.parameters(True, False)
    def test_the_graph_twin_gives_the_same_texts_and_their_places(self, lower):
        cases = [(pred, orig) for pred, orig, _, _ in FINAL_TEXTS] + [("x", ""), ("né", "Né")]
        answers, first, last = answer_spans.final_texts(
            tf.constant([pred for pred, _ in cases]), tf.constant([orig for _, orig in cases]),
            lower)
        for row, (pred, orig) in enumerate(cases):
            expected = answer_spans.get_final_text(pred, orig, lower)
            self.assertEqual(answers[row].numpy().decode(), expected, msg=(pred, orig))
            self.assertEqual(orig[int(first[row]):int(last[row]) + 1], expected, msg=(pred, orig))
        empty = answer_spans.final_texts(tf.constant([], tf.string), tf.constant([], tf.string),
                                         lower)
        self.assertEqual(empty[0].shape, (0,))
        # Bytes that are not UTF-8 (no Python text holds them) come out as they went in.
        answers, _, _ = answer_spans.final_texts(tf.constant(["zz"]),
                                                 tf.constant([b"ab\xff cd"]), lower)
        self.assertEqual(answers.numpy().tolist(), [b"ab\xff cd"])

    def test_pieces_text_undoes_the_wordpiece_joins(self):
        pieces = ["un", "##believ", "##able", "film", "!"]
        self.assertEqual(answer_spans.pieces_text(pieces), "unbelievable film !")
        self.assertEqual(answer_spans.pieces_texts(tf.ragged.constant([pieces, []]))
                         .numpy().tolist(), [b"unbelievable film !", b""])


class SpanSearchTest(tf.test.TestCase):

    def test_the_top_starts_and_ends_are_paired_in_order_and_length(self):
        start = np.array([9.0, 5.0, 1.0, 0.0, 3.0])
        end = np.array([8.0, 0.0, 1.0, 4.0, 2.0])
        context = {1, 2, 3, 4}
        spans = answer_spans.candidate_spans(start, end, context, context, 3, 30)
        # Starts by rank: 0 (not context), 1, 4; ends by rank: 0 (not context), 3, 4.
        self.assertEqual([(span.start, span.end) for span in spans], [(1, 3), (1, 4), (4, 4)])
        self.assertEqual(spans[0].score, 9.0)
        spans = answer_spans.candidate_spans(start, end, context, context, 3, 2)
        self.assertEqual([(span.start, span.end) for span in spans], [(4, 4)])  # (1, 3) is 3 long
        self.assertEqual(answer_spans.candidate_spans(start, end, {1}, {2}, 2, 30), [])  # 2: rank 3

    def test_the_graph_twin_finds_the_best_candidate(self):
        rng = np.random.default_rng(7)
        rows, positions = 40, 24
        start = rng.normal(size=(rows, positions)).astype(np.float32)
        end = rng.normal(size=(rows, positions)).astype(np.float32)
        in_context = np.zeros((rows, positions), bool)
        for row in range(rows):
            first = rng.integers(1, 10)
            in_context[row, first:rng.integers(first, positions)] = True
        # Starts only where the window has the most context: a part of the context.
        may_start = in_context & (rng.random((rows, positions)) < 0.7)
        for n_best_size, max_answer_length in ((3, 4), (20, 30), (50, 1)):
            got = answer_spans.best_spans(tf.constant(start), tf.constant(end),
                                          tf.constant(may_start), tf.constant(in_context),
                                          n_best_size,
                                          max_answer_length)
            for row in range(rows):
                context = set(np.flatnonzero(in_context[row]).tolist())
                starts = set(np.flatnonzero(may_start[row]).tolist())
                spans = answer_spans.candidate_spans(start[row], end[row], starts, context,
                                                     n_best_size, max_answer_length)
                self.assertEqual(bool(got[3][row]), bool(spans))
                if spans:
                    best = max(spans, key=lambda span: span.score)
                    self.assertEqual((int(got[0][row]), int(got[1][row])),
                                     (best.start, best.end))
                    self.assertEqual(float(got[2][row]), best.score)


if __name__ == "__main__":
    tf.test.main()
