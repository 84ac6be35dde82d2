"""Counts and numbers: accepted as Python or NumPy values, refused with the argument's name."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from core.arguments import check_integer, check_number


class CheckIntegerTest(tf.test.TestCase, parameterized.TestCase):

    def test_integers_of_either_kind_pass_as_ints(self):
        self.assertEqual(check_integer("batch_size", 8), 8)
        value = check_integer("batch_size", np.int64(8))
        self.assertEqual((value, type(value)), (8, int))
        self.assertEqual(check_integer("bilstm_units", 0, minimum=0), 0)

    @parameterized.parameters(
        (0, 1, "batch_size must be a positive integer, got 0"),
        (True, 1, "batch_size must be a positive integer, got True"),
        ("8", 1, "batch_size must be a positive integer, got '8'"),
        (8.0, 1, "batch_size must be a positive integer, got 8.0"),
        (-1, 0, "batch_size must be an integer >= 0, got -1"),
    )
    def test_other_values_are_refused(self, value, minimum, message):
        with self.assertRaisesRegex(ValueError, message):
            check_integer("batch_size", value, minimum=minimum)


class CheckNumberTest(tf.test.TestCase, parameterized.TestCase):

    def test_finite_numbers_in_range_pass_as_floats(self):
        self.assertEqual(check_number("rate", np.float32(0.5), 0.0, above=True), 0.5)
        self.assertEqual(check_number("share", 1, 0.0, 1.0), 1.0)
        self.assertEqual(check_number("share", 0, 0.0, 1.0, below=True), 0.0)

    @parameterized.parameters(
        (math.nan, {"minimum": 0.0, "above": True}, "rate must be a positive finite number"),
        (math.inf, {"minimum": 0.0, "above": True}, "rate must be a positive finite number"),
        (0.0, {"minimum": 0.0, "above": True}, "got 0.0"),
        (1.0, {"minimum": 0.0, "maximum": 1.0, "below": True},
         r"rate must be a finite number in \[0, 1\), got 1.0"),
        (-0.5, {"minimum": 0.0}, "rate must be a finite number >= 0, got -0.5"),
        (False, {}, "rate must be a finite number, got False"),
        ("0.1", {}, "got '0.1'"),
    )
    def test_other_values_are_refused(self, value, limits, message):
        with self.assertRaisesRegex(ValueError, message):
            check_number("rate", value, **limits)

    def test_the_error_class_can_be_the_callers(self):
        class FieldError(ValueError):
            pass

        with self.assertRaises(FieldError):
            check_number("rate", math.nan, error=FieldError)
        with self.assertRaises(FieldError):
            check_integer("count", 0, error=FieldError)


if __name__ == "__main__":
    tf.test.main()
