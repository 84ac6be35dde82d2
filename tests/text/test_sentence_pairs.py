"""Packing texts into [CLS] A [SEP] B [SEP] with truncation and padding, offline and in-graph."""

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from text.sentence_pairs import kept_lengths, pack, pack_ids, pack_ragged

VOCAB = {"[PAD]": 0, "[CLS]": 1, "[SEP]": 2, "a": 3, "b": 4, "c": 5, "d": 6}


CLS, SEP = 1, 2


def truncate_pair(tokens_a: list, tokens_b: list, max_length: int) -> None:
    """The original's `_truncate_seq_pair`, in place: one token at a time from the end of the
    currently longer segment, the second on a tie."""
    while len(tokens_a) + len(tokens_b) > max_length:
        longer = tokens_a if len(tokens_a) > len(tokens_b) else tokens_b
        longer.pop()


def _random_examples(seed: int, max_seq_length: int, count: int = 200):
    """Pairs, single texts (None), empty second texts, and pairs exactly at the limit."""
    rng = np.random.default_rng(seed)
    firsts, seconds = [], []
    for k in range(count):
        first = rng.integers(3, 50, rng.integers(0, 2 * max_seq_length)).tolist()
        kind = k % 4
        if kind == 0:
            second = None
        elif kind == 1:
            second = []
        elif kind == 2:
            second = rng.integers(3, 50, rng.integers(0, 2 * max_seq_length)).tolist()
        else:  # fills every position without truncation
            first = first[:max_seq_length - 3]
            second = rng.integers(3, 50, max_seq_length - 3 - len(first)).tolist()
        firsts.append(first)
        seconds.append(second)
    return firsts, seconds


def _reference(first, second, max_seq_length):
    """The layout spelled out position by position, after the original's truncation."""
    first, second, is_pair = list(first), list(second or []), bool(second)
    if is_pair:
        truncate_pair(first, second, max_seq_length - 3)
        ids = [CLS, *first, SEP, *second, SEP]
        segments = [0] * (len(first) + 2) + [1] * (len(second) + 1)
    else:
        ids = [CLS, *first[:max_seq_length - 2], SEP]
        segments = [0] * len(ids)
    padding = [0] * (max_seq_length - len(ids))
    return ids + padding, [1] * len(ids) + padding, segments + padding


class SentencePairsTest(tf.test.TestCase, parameterized.TestCase):

    def test_single_text_layout_and_padding(self):
        packed = pack(["a", "b"], None, 6, VOCAB)
        self.assertEqual(packed.tokens, ["[CLS]", "a", "b", "[SEP]"])
        self.assertEqual(packed.input_ids, [1, 3, 4, 2, 0, 0])
        self.assertEqual(packed.input_mask, [1, 1, 1, 1, 0, 0])
        self.assertEqual(packed.segment_ids, [0, 0, 0, 0, 0, 0])

    def test_pair_layout_has_second_segment(self):
        packed = pack(["a"], ["b", "c"], 8, VOCAB)
        self.assertEqual(packed.tokens, ["[CLS]", "a", "[SEP]", "b", "c", "[SEP]"])
        self.assertEqual(packed.segment_ids, [0, 0, 0, 1, 1, 1, 0, 0])
        self.assertEqual(packed.input_mask, [1] * 6 + [0] * 2)

    @parameterized.parameters([{'tokens_b': v} for v in [[], ()]])
    def test_second_text_without_tokens_packs_as_single_text(self, tokens_b):
        """The original tests `if tokens_b:`, so an empty or blank text_b adds no [SEP]."""
        self.assertEqual(pack(["a", "b"], tokens_b, 6, VOCAB), pack(["a", "b"], None, 6, VOCAB))
        # and the single text keeps the room a second [SEP] would have taken
        self.assertEqual(pack(["a", "b", "c", "d"], tokens_b, 6, VOCAB).tokens, [
            "[CLS]", "a", "b", "c", "d", "[SEP]"])

    def test_single_text_keeps_head(self):
        packed = pack(["a", "b", "c", "d"], None, 4, VOCAB)
        self.assertEqual(packed.tokens, ["[CLS]", "a", "b", "[SEP]"])

    def test_pair_truncation_cuts_longer_first(self):
        self.assertEqual(pack(["a", "b", "c", "d", "a"], ["b", "c"], 8, VOCAB).tokens,
                         ["[CLS]", "a", "b", "c", "[SEP]", "b", "c", "[SEP]"])
        self.assertEqual(pack(["a", "b"], ["b", "c", "d"], 5, VOCAB).tokens,
                         ["[CLS]", "a", "[SEP]", "b", "[SEP]"])

    def test_kept_lengths_are_where_the_originals_loop_ends(self):
        """The closed form against `_truncate_seq_pair` for every pair of lengths up to 40
        and every length from 3 to 43, as ints and as one array."""
        cases = [(a, b, length) for a in range(41) for b in range(41) for length in range(3, 44)]
        expected = []
        for a, b, length in cases:
            first, second = list(range(a)), list(range(b))
            if b:
                truncate_pair(first, second, length - 3)
            else:
                del first[length - 2:]
            expected.append((len(first), len(second), b > 0))
        self.assertEqual([tuple(int(x) for x in kept_lengths(a, b, length))
                          for a, b, length in cases[::97]], expected[::97])
        columns = np.asarray(cases).T[:, :, None]
        kept_a, kept_b, pair = kept_lengths(*columns)
        self.assertAllEqual(np.concatenate([kept_a, kept_b, pair], axis=1), expected)

    def test_inputs_are_not_modified(self):
        tokens_a = ["a", "b", "c"]
        pack(tokens_a, ["d"], 4, VOCAB)
        self.assertEqual(tokens_a, ["a", "b", "c"])

    def test_too_short_length_is_rejected(self):
        with self.assertRaisesRegex(ValueError, "max_seq_length"):
            pack(["a"], None, 2, VOCAB)

    @parameterized.parameters(3, 4, 7, 12)
    def test_pack_ids_builds_the_layout_of_each_example(self, max_seq_length):
        firsts, seconds = _random_examples(max_seq_length, max_seq_length)
        packed = pack_ids(firsts, seconds, max_seq_length, CLS, SEP)
        for row, (first, second) in enumerate(zip(firsts, seconds)):
            got = [packed[key][row].tolist() for key in ("input_ids", "input_mask", "segment_ids")]
            self.assertEqual(got,
                             list(_reference(first, second, max_seq_length)), msg=(first, second))

    @parameterized.parameters(3, 4, 7, 12)
    def test_in_graph_packer_matches_pack_ids(self, max_seq_length):
        """What serving computes equals what training was fed, truncation included."""
        firsts, seconds = _random_examples(100 + max_seq_length, max_seq_length)
        expected = pack_ids(firsts, seconds, max_seq_length, CLS, SEP)
        ragged_a = tf.ragged.constant(firsts, dtype=tf.int64, ragged_rank=1)
        ragged_b = tf.ragged.constant([second or [] for second in seconds], dtype=tf.int64,
                                      ragged_rank=1)
        served = pack_ragged(ragged_a, ragged_b, max_seq_length, CLS, SEP)
        singles = pack_ragged(ragged_a, None, max_seq_length, CLS, SEP)
        expected_singles = pack_ids(firsts, [None] * len(firsts), max_seq_length, CLS, SEP)
        for key in ("input_ids", "input_mask", "segment_ids"):
            self.assertAllEqual(served[key].numpy(), expected[key], msg=key)
            self.assertAllEqual(singles[key].numpy(), expected_singles[key], msg=key)

    def test_in_graph_packer_refuses_segments_of_different_batch_sizes(self):
        """Unguarded, one row of ids_b would broadcast over every row of ids_a: wrong ids, no
        error."""
        ids_a = tf.ragged.constant([[3, 4], [5], [6, 7, 8]], dtype=tf.int64)
        ids_b = tf.ragged.constant([[3]], dtype=tf.int64)
        spec = tf.RaggedTensorSpec([None, None], tf.int64, ragged_rank=1)
        in_graph = tf.function(lambda a, b: pack_ragged(a, b, 8, CLS, SEP, names=("x", "y")),
                               input_signature=[spec, spec])
        for pack in (lambda a, b: pack_ragged(a, b, 8, CLS, SEP, names=("x", "y")), in_graph):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        "x and y differ in batch size: 3 and 1; give one of "
                                        "each per example"):
                pack(ids_a, ids_b)
        empty = tf.ragged.constant([], dtype=tf.int64, ragged_rank=1)
        self.assertEqual(in_graph(empty, empty)["input_ids"].shape, (0, 8))

    def test_pack_ids_rejects_unequal_segment_lists(self):
        with self.assertRaisesRegex(ValueError, "2 first segments but 1 second"):
            pack_ids([[3], [4]], [None], 8, CLS, SEP)


if __name__ == "__main__":
    tf.test.main()
