"""The in-graph windows are the CoNLL runner's, and score each token where the original would."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from data_prep.datasets.conll import Sentence, build_windows
from tests.text.test_sliding_windows import _best_window
from text.sliding_windows_graph import max_context_windows, plan_windows, window_tokens


def _plan(lengths, max_tokens, stride):
    plan = plan_windows(tf.constant(lengths), max_tokens, stride)
    return [list(zip(plan.starts.numpy()[plan.rows.numpy() == row].tolist(),
                     plan.lengths.numpy()[plan.rows.numpy() == row].tolist()))
            for row in range(len(lengths))], plan


def _owners(plan, lengths, max_tokens, stride):
    rows = np.repeat(np.arange(len(lengths)), lengths)
    positions = np.concatenate([np.arange(length) for length in lengths])
    window, offset = max_context_windows(plan, tf.constant(rows), tf.constant(positions),
                                         max_tokens, stride)
    first = np.cumsum(plan.counts.numpy()) - plan.counts.numpy()
    return (window.numpy() - first[rows]).tolist(), offset.numpy().tolist()


class SlidingWindowsGraphTest(tf.test.TestCase, parameterized.TestCase):

    def test_windows_step_by_stride_and_the_last_ends_full_at_the_last_token(self):
        spans, plan = _plan([10, 7, 4, 0], 6, 2)
        self.assertEqual(spans, [[(0, 6), (2, 6), (4, 6)], [(0, 6), (1, 6)], [(0, 4)], [(0, 0)]])
        self.assertAllEqual(plan.counts, [3, 2, 1, 1])
        tokens = tf.ragged.constant([list(range(10)), list(range(7)), [7, 8, 9, 10], []])
        self.assertEqual(window_tokens(tokens, plan)[4].numpy().tolist(), [1, 2, 3, 4, 5, 6])

    def test_a_hand_made_case_follows_the_originals_rule(self):
        # Ten tokens, windows of six from 0, 2 and 4. Token 5 has min(5, 0), min(3, 2) and
        # min(1, 4) context: the second window. Token 6: min(4, 1) or min(2, 3): the third.
        # Windows of five over seven tokens, from 0 and 2: token 3 has min(3, 1) in the
        # first and min(1, 3) in the second, a tie that goes to the earlier window.
        spans, plan = _plan([10, 7], 6, 2)
        owners, offsets = _owners(plan, [10, 7], 6, 2)
        self.assertEqual(owners[:10], [0, 0, 0, 0, 1, 1, 2, 2, 2, 2])
        self.assertEqual(offsets[5], 3)
        spans_b, plan_b = _plan([7], 5, 2)
        owners_b, _ = _owners(plan_b, [7], 5, 2)
        self.assertEqual(owners_b, [0, 0, 0, 0, 1, 1, 1])
        for position in range(10):
            self.assertEqual(owners[position], _best_window(spans[0], position))

    @parameterized.parameters(range(3))
    def test_random_rows_match_the_runner_and_the_originals_loop(self, seed):
        rng = np.random.default_rng(seed)
        for _ in range(30):
            max_tokens = int(rng.integers(1, 12))
            stride = int(rng.integers(1, max_tokens + 1))
            lengths = rng.integers(1, 40, int(rng.integers(1, 5))).tolist()
            spans, plan = _plan(lengths, max_tokens, stride)
            owners, offsets = _owners(plan, lengths, max_tokens, stride)
            index = 0
            for row, length in enumerate(lengths):
                # The runner's windows over a sentence of `length` one-piece words.
                sentence = Sentence([f"w{k}" for k in range(length)], ["O"] * length, 0, "x")
                runner = build_windows([sentence], _OnePiece(), max_tokens + 2, {"O": 0},
                                       stride=stride)
                self.assertEqual(len(spans[row]), len(runner))
                for position in range(length):
                    best = _best_window(spans[row], position)
                    self.assertEqual(owners[index], best)
                    self.assertEqual(offsets[index], position - spans[row][best][0])
                    # The runner scores the word in that window, at that offset after [CLS].
                    self.assertEqual(runner[best].word_positions[position], offsets[index] + 1)
                    index += 1

    def test_non_positive_sizes_are_refused(self):
        with self.assertRaisesRegex(ValueError, "must be positive"):
            plan_windows(tf.constant([3]), 0, 1)


class _OnePiece:
    """A tokenizer of one piece per word, for the runner's windows."""

    vocab = {"[UNK]": 1}
    cls_id, sep_id = 2, 3

    def tokenize_batch(self, words):
        return tf.ragged.constant([[4 + index] for index, _ in enumerate(words)]), None
