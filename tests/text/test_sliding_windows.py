"""Sliding windows and the "max context" rule that SQuAD features and CoNLL windows share."""

import numpy as np
import pytest
import tensorflow as tf
from absl.testing import parameterized

from text.sliding_windows import (graph_question_windows, max_context_owners, question_windows,
                                  windows)


def _best_window(spans, position):
    """The rule as the original's loop: only a strictly better score wins, ties stay early."""
    best, best_score = None, None
    for index, (start, length) in enumerate(spans):
        if not start <= position < start + length:
            continue
        score = min(position - start, start + length - 1 - position) + 0.01 * length
        if best_score is None or score > best_score:
            best, best_score = index, score
    return best


class SlidingWindowsTest(tf.test.TestCase, parameterized.TestCase):

    def test_windows_step_by_stride_and_end_at_the_last_token(self):
        self.assertEqual(windows(10, 6, 2), [(0, 6), (2, 6), (4, 6)])
        self.assertEqual(windows(7, 3, 3), [(0, 3), (3, 3), (6, 1)])
        self.assertEqual(windows(4, 6, 2), [(0, 4)])
        self.assertEqual(windows(0, 6, 2), [])

    def test_a_stride_longer_than_a_window_skips_no_token(self):
        self.assertEqual(windows(7, 3, 5), [(0, 3), (3, 3), (6, 1)])

    @parameterized.parameters([(0, 1), (3, 0)])
    def test_windows_reject_non_positive_sizes(self, max_tokens, stride):
        with self.assertRaisesRegex(ValueError, "must be positive"):
            windows(5, max_tokens, stride)

    @parameterized.parameters(range(4))
    def test_owner_is_the_window_of_most_context(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(50):
            num_tokens = int(rng.integers(1, 40))
            spans = windows(num_tokens, int(rng.integers(1, 12)), int(rng.integers(1, 12)))
            owners = max_context_owners(spans, num_tokens).tolist()
            self.assertEqual(owners, [_best_window(spans, p) for p in range(num_tokens)], msg=spans)

    def test_equal_context_goes_to_the_longer_then_the_earlier_window(self):
        self.assertEqual(max_context_owners([(2, 3), (2, 4)], 6).tolist()[3], 1)
        # token 3 has 1 token on its short side in both windows of equal length: the first keeps it
        self.assertEqual(max_context_owners([(0, 5), (2, 5)], 7).tolist()[3], 0)


    def test_question_windows_fit_beside_the_question(self):
        spans, owned = question_windows(3, 10, 12, 2)  # 12 - 3 - 3 = 6 context positions
        self.assertEqual(spans, [(0, 6), (2, 6), (4, 6)])
        self.assertEqual([mine.tolist() for mine in owned],
                         [[True] * 4 + [False] * 2, [False, False, True, True, False, False],
                          [False, False] + [True] * 4])
        self.assertEqual(question_windows(3, 0, 12, 2), ([], []))

    @parameterized.parameters(range(3))
    @pytest.mark.long
    def test_the_graph_plans_the_same_windows(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            length, stride, rows = (int(rng.integers(6, 20)), int(rng.integers(1, 12)),
                                    int(rng.integers(1, 6)))
            queries, contexts = rng.integers(1, length - 3, rows), rng.integers(0, 40, rows)
            got = graph_question_windows(tf.constant(queries, tf.int64),
                                         tf.constant(contexts, tf.int64), length, stride)
            expected = []
            for row, (query, context) in enumerate(zip(queries, contexts)):
                spans, owned = question_windows(int(query), int(context), length, stride)
                # A row without context has one empty window in the graph.
                expected += [(row, start, size, mine.tolist()) for (start, size), mine in
                             zip(spans or [(0, 0)], owned or [np.zeros(0, bool)])]
            row, start, size, owns = got
            self.assertEqual(list(zip(row.numpy().tolist(), start.numpy().tolist(),
                                      size.numpy().tolist(), owns.to_list())), expected)


if __name__ == "__main__":
    tf.test.main()
