"""A model's serving spec refuses what no model serves and names its labels one way."""

import tensorflow as tf
from absl.testing import parameterized

from network.serving_spec import ServingSpec


class ServingSpecTest(tf.test.TestCase, parameterized.TestCase):

    @parameterized.named_parameters(
        ("unknown_kind", {"kind": "ranker"}, "kind must be one of"),
        ("unknown_activation", {"activation": "tanh"}, "activation must be None or one of"),
        ("threshold_without_sigmoid", {"activation": "softmax", "threshold": 0.5},
         "threshold=0.5 goes with activation='sigmoid'"),
        ("sigmoid_without_threshold", {"activation": "sigmoid"},
         "threshold=None goes with activation='sigmoid'"),
        ("rank_4", {"input_rank": 4}, "input_rank must be 2 or 3, got 4"),
        ("two_outputs_one_tensor", {"outputs": ("start_logits", "end_logits")},
         "a model returns one tensor, or a dict"))
    def test_a_spec_no_model_serves_is_refused(self, changes, message):
        fields = {"kind": "classifier", "outputs": ("logits",), "num_labels": 2, **changes}
        with self.assertRaisesRegex(ValueError, message):
            ServingSpec(**fields)

    def test_labels_are_the_names_or_numbered(self):
        named = ServingSpec("tagger", ["logits"], num_labels=2, label_names=["O", "B-PER"])
        self.assertEqual(named.labels("LABEL_{}"), ["O", "B-PER"])
        self.assertEqual(named.label_names, ("O", "B-PER"))  # frozen: lists become tuples
        self.assertEqual(named.outputs, ("logits",))
        unnamed = ServingSpec("classifier", ("logits",), num_labels=3)
        self.assertEqual(unnamed.labels(), ["0", "1", "2"])
        self.assertEqual(unnamed.labels("LABEL_{}"), ["LABEL_0", "LABEL_1", "LABEL_2"])
        with self.assertRaisesRegex(ValueError, "a span model has no labels"):
            ServingSpec("span", ("start_logits", "end_logits"), returns_dict=True).labels()


if __name__ == "__main__":
    tf.test.main()
