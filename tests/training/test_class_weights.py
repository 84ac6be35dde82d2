"""training.class_weights: the spec read and refused, balanced weights, fit's dict checked."""

import math

import numpy as np
from absl.testing import parameterized

from core.arguments import FieldError
from tests.fixtures import TestCase
from training.class_weights import (BALANCED, balanced_class_weights, check_class_weight,
                                    parse_class_weights, resolve_class_weights)


class ClassWeightsTest(TestCase, parameterized.TestCase):

    def test_spec_reads_balanced_and_label_weight_pairs(self):
        self.assertEqual(parse_class_weights("balanced"), BALANCED)
        self.assertEqual(parse_class_weights("neg:1, pos:4.5"), {"neg": 1.0, "pos": 4.5})
        self.assertEqual(parse_class_weights("a:b:2"), {"a:b": 2.0})  # the last colon splits

    @parameterized.parameters(
        ("pos:-1", "class_weights: the weight of 'pos' is '-1'; a weight is a finite number"),
        ("pos:nan", "class_weights: the weight of 'pos' is 'nan'"),
        ("pos:inf", "class_weights: the weight of 'pos' is 'inf'"),
        ("pos:x", "class_weights: the weight of 'pos' is 'x'"),
        ("pos", "class_weights: 'pos' is not label:weight"),
        ("pos:1,pos:2", "class_weights gives label 'pos' twice"),
        ("pos:0,neg:0", "class_weights=pos:0,neg:0 weighs every label 0"),
        ("", "class_weights must be 'balanced' or label:weight pairs"),
    )
    def test_bad_spec_is_refused_naming_the_field(self, spec, message):
        with self.assertRaisesRegex(ValueError, "^" + message.replace("(", r"\(")):
            parse_class_weights(spec)

    def test_unknown_label_is_refused_with_the_task_labels(self):
        with self.assertRaisesRegex(ValueError, "class_weights names 'maybe', not among the "
                                    "task's labels neg, pos"):
            resolve_class_weights("pos:2,maybe:3", ["neg", "pos"], [0, 1])

    def test_explicit_weights_in_label_order_unlisted_weigh_one(self):
        self.assertEqual(resolve_class_weights("c:3,a:0.5", ["a", "b", "c"], []), [0.5, 1.0, 3.0])

    def test_balanced_is_n_over_k_times_count(self):
        # 6 of label 0, 2 of label 1, none of label 2: 8/(3*6), 8/(3*2), 1.
        weights = balanced_class_weights([0] * 6 + [1] * 2, 3)
        self.assertAllClose(weights, [8 / 18, 8 / 6, 1.0])
        self.assertAllClose(resolve_class_weights("balanced", ["a", "b"], [0, 0, 0, 1]),
                            [4 / 6, 4 / 2])


class CheckClassWeightTest(TestCase, parameterized.TestCase):
    """`fit(class_weight=...)`: Keras takes each of these without a word."""

    def test_indices_and_names_give_every_class_its_weight(self):
        self.assertEqual(check_class_weight({1: 4}, 3), {0: 1.0, 1: 4.0, 2: 1.0})
        self.assertEqual(check_class_weight({"pos": 4, np.int64(0): 0.5}, 2, ["neg", "pos"]),
                         {0: 0.5, 1: 4.0})
        self.assertEqual(check_class_weight({0: 0}, 2), {0: 0.0, 1: 1.0})  # 1 still learns

    @parameterized.parameters(
        ({0: -1.0, 1: 1.0}, "class_weight: the weight of class 0 is -1.0; a weight is a "
                            "finite number >= 0"),
        ({0: math.nan, 1: 1}, "class_weight: the weight of class 0 is nan"),
        ({0: 1, 1: math.inf}, "class_weight: the weight of class 1 is inf"),
        ({0: "2", 1: 1}, "class_weight: the weight of class 0 is '2'"),
        ({0: 1, 1: 1, 5: 2}, "class_weight names class 5, which the model does not have: it "
                             "takes class indices 0 to 1 or the names 'neg', 'pos'"),
        ({-1: 1}, "class_weight names class -1, which the model does not have"),
        ({True: 1}, "class_weight names class True"),
        ({"maybe": 1}, "class_weight names class 'maybe'"),
        ({"pos": 1, 1: 2}, "class_weight weighs class 1 twice"),
        ({0: 0, 1: 0.0}, r"class_weight=\{0: 0, 1: 0.0\} weighs every class it names 0"),
        ({}, r"class_weight must be a dict \{class: weight\} naming at least one class, "
             r"got \{\}"),
        ([1.0, 2.0], r"class_weight must be a dict .* got \[1.0, 2.0\]"),
    )
    def test_refused_naming_class_weight_and_the_value(self, class_weight, message):
        with self.assertRaisesRegex(FieldError, message):
            check_class_weight(class_weight, 2, ["neg", "pos"])
