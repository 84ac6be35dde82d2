"""Counts and numbers: accepted as Python or NumPy values, refused with the argument's name."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

import pickle

from core.arguments import (FieldError, check_integer, check_non_negative, check_number,
                            check_positive)


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


class FieldErrorTest(tf.test.TestCase):

    def test_fields_read_bare_from_python_and_as_flags_where_they_are_flags(self):
        error = FieldError("{train_batch_size}={0} is not divisible by "
                           "{gradient_accumulation_steps}={1}", 32, 3)
        self.assertEqual(str(error), "train_batch_size=32 is not divisible by "
                                     "gradient_accumulation_steps=3")
        self.assertEqual(error.fields, ("train_batch_size", "gradient_accumulation_steps"))
        self.assertEqual(error.render({"train_batch_size"}),
                         "--train_batch_size=32 is not divisible by "
                         "gradient_accumulation_steps=3")

    def test_values_holding_braces_are_kept_as_given(self):
        error = FieldError("{labels} must be distinct, got {0!r}", ["{x}", "{x}"])
        self.assertEqual(error.render({"labels"}), "--labels must be distinct, got ['{x}', '{x}']")

    def test_the_checks_name_their_field(self):
        with self.assertRaises(FieldError) as raised:
            check_number("learning_rate", math.nan, 0, above=True)
        self.assertEqual(raised.exception.render({"learning_rate"}),
                         "--learning_rate must be a positive finite number, got nan")
        with self.assertRaises(FieldError) as raised:
            check_integer("num_restarts", 0)
        self.assertEqual(raised.exception.fields, ("num_restarts",))

    def test_a_pickled_error_renders_the_same(self):
        error = pickle.loads(pickle.dumps(FieldError("{epochs} must be positive, got {0}", 0)))
        self.assertEqual(error.render({"epochs"}), "--epochs must be positive, got 0")



class SignChecksTest(tf.test.TestCase, parameterized.TestCase):
    """check_positive and check_non_negative: the validators the settings classes share."""

    def test_values_pass_through_as_given(self):
        self.assertEqual(check_positive("doc_stride", 128), 128)
        self.assertIsInstance(check_positive("doc_stride", 128), int)
        self.assertEqual(check_positive("lm_aux_weight", np.float32(0.5)), 0.5)
        self.assertEqual(check_non_negative("bilstm_units", 0), 0)

    @parameterized.parameters(
        (check_positive, 0, "--n must be a positive finite number, got 0"),
        (check_positive, math.nan, "--n must be a positive finite number, got nan"),
        (check_positive, "8", "--n must be a positive finite number, got '8'"),
        (check_non_negative, -1, "--n must be a finite number >= 0, got -1"),
        (check_non_negative, math.inf, "--n must be a finite number >= 0, got inf"),
        (check_non_negative, True, "--n must be a finite number >= 0, got True"),
    )
    def test_other_values_are_field_errors(self, check, value, rendered):
        with self.assertRaises(FieldError) as raised:
            check("n", value)
        self.assertEqual(str(raised.exception), rendered.removeprefix("--"))
        self.assertEqual(raised.exception.render({"n"}), rendered)
