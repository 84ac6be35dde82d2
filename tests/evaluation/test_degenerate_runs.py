"""evaluation.degenerate_runs: the majority-class and sweep-sibling signs of a degenerate run."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from evaluation.degenerate_runs import majority_accuracy, majority_fields, run_warning


class MajorityAccuracyTest(tf.test.TestCase):

    def test_share_of_the_most_frequent_label(self):
        self.assertAllClose(majority_accuracy([0, 1, 1, 1, 0, 1]), 4 / 6)
        self.assertAllClose(majority_accuracy(np.array([[2], [2], [0]])), 2 / 3)

    def test_refuses_no_labels(self):
        with self.assertRaisesRegex(ValueError, "no labels"):
            majority_accuracy([])


class RunWarningTest(tf.test.TestCase, parameterized.TestCase):

    MAJORITY = {"eval_accuracy": 0.516}

    @parameterized.named_parameters(
        ("sane_single_run", 0.80, [0.80], ""),
        ("sane_among_siblings", 0.79, [0.79, 0.81, 0.80], ""),
        ("exactly_3_points_below_is_sane", 0.78, [0.78, 0.81], ""),
        ("far_below_best", 0.746, [0.746, 0.819, 0.81],
         "degenerate: 7.3 points below the sweep's best run (dev score 74.6 vs 81.9)"),
        ("near_majority_single_run", 0.52, [0.52],
         "degenerate: near majority class (eval_accuracy 52.0%, majority class 51.6%)"),
        ("one_point_above_majority", 0.526, [0.526],
         "degenerate: near majority class (eval_accuracy 52.6%, majority class 51.6%)"),
        ("over_one_point_above_majority", 0.527, [0.527], ""),
        ("below_majority", 0.484, [0.484],
         "degenerate: near majority class (eval_accuracy 48.4%, majority class 51.6%)"),
        ("both", 0.52, [0.52, 0.81, math.nan],
         "degenerate: near majority class (eval_accuracy 52.0%, majority class 51.6%); "
         "29.0 points below the sweep's best run (dev score 52.0 vs 81.0)"),
        ("diverged_siblings_ignored", 0.80, [0.80, math.nan, math.nan], ""),
    )
    def test_warning(self, accuracy, sibling_scores, expected):
        results = {"eval_accuracy": accuracy, "eval_score": accuracy}
        self.assertEqual(run_warning(results, self.MAJORITY, accuracy, sibling_scores), expected)

    def test_each_dev_set_is_checked_against_its_own_majority(self):
        results = {"dev_matched_accuracy": 0.36, "dev_mismatched_accuracy": 0.70}
        majorities = {"dev_matched_accuracy": 0.355, "dev_mismatched_accuracy": 0.352}
        self.assertEqual(run_warning(results, majorities, 0.53, [0.53]),
                         "degenerate: near majority class (dev_matched_accuracy 36.0%, "
                         "majority class 35.5%)")

    def test_regression_has_no_majority_check(self):
        self.assertEqual(run_warning({"eval_pearson": 0.0}, {}, 0.0, [0.0]), "")


class MajorityFieldsTest(tf.test.TestCase):

    def test_each_dev_set_gets_its_baseline_and_whether_the_run_is_near_it(self):
        results = {"dev_matched_accuracy": 0.36, "dev_mismatched_accuracy": 0.70}
        majorities = {"dev_matched_accuracy": 0.355, "dev_mismatched_accuracy": 0.352}
        self.assertEqual(majority_fields(results, majorities), {
            "dev_matched_majority_class_accuracy": 0.355, "dev_matched_near_majority_class": 1.0,
            "dev_mismatched_majority_class_accuracy": 0.352,
            "dev_mismatched_near_majority_class": 0.0})

    def test_a_regression_has_none(self):
        self.assertEqual(majority_fields({"eval_pearson": 0.1}, {}), {})


if __name__ == "__main__":
    tf.test.main()
