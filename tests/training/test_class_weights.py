"""training.class_weights: the spec read and refused, balanced weights."""

from absl.testing import parameterized

from tests.fixtures import TestCase
from training.class_weights import (BALANCED, balanced_class_weights, parse_class_weights,
                                    resolve_class_weights)


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
