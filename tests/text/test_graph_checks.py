"""Checks on tensors: one readable error, raised before anything computed from the tensors."""

import tensorflow as tf

from text.graph_checks import guarded, same_row_lengths, same_rows


class GraphChecksTest(tf.test.TestCase):

    def test_eagerly_the_message_names_the_values(self):
        value = tf.constant(7)
        self.assertIs(guarded(value > 3, "never shown {}", [value], value), value)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError, "^n must exceed 9, got 7$"):
            guarded(value > 9, "n must exceed {}, got {}", [9, value], value)

    def test_in_a_graph_nothing_computed_from_the_tensors_runs_before_the_check(self):
        """An op that would fail its own way on a bad input (here a gather out of range, as
        a kernel that reads past a buffer) must never run: the check's error is the one seen."""
        table = tf.range(10)

        @tf.function(input_signature=[tf.TensorSpec([None], tf.int32)])
        def downstream(indices):
            # A slow condition (a loop of 2000 steps), so an unguarded gather would run first.
            largest = tf.while_loop(lambda step, value: step < 2000,
                                    lambda step, value: (step + 1, value),
                                    (0, tf.reduce_max(indices)))[1]
            indices = guarded(largest < 10, "index {} is past the table", [largest], indices)
            return tf.gather(table, indices)

        self.assertAllEqual(downstream(tf.constant([1, 9])), [1, 9])
        for _ in range(3):
            with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                        r"assertion failed: \[index 12 is past the table\]"):
                downstream(tf.constant([1, 12]))

    def test_rows_and_row_lengths_of_two_inputs(self):
        words = tf.ragged.constant([["a", "b"], ["c"]])
        first, second = same_rows(words, tf.constant(["x", "y"]), ("words", "texts"))
        self.assertAllEqual(first, words)
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    "words and texts differ in batch size: 2 and 3"):
            same_rows(words, tf.constant(["x", "y", "z"]), ("words", "texts"))
        same_row_lengths(words, tf.ragged.constant([[1, 2], [3]]), ("words", "labels"))
        with self.assertRaisesRegex(tf.errors.InvalidArgumentError,
                                    "words and labels differ in row 1: 1 and 0 items"):
            same_row_lengths(words, tf.ragged.constant([[1, 2], []]), ("words", "labels"))


if __name__ == "__main__":
    tf.test.main()
