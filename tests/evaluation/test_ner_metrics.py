"""Entity-level NER scores: hand-computed values, conlleval's counts, and parity with seqeval."""

import random
import warnings

import tensorflow as tf
from absl.testing import parameterized
from seqeval.metrics import classification_report
from seqeval.metrics.sequence_labeling import precision_recall_fscore_support

from evaluation.ner import entity_scores, token_accuracy

# IOB1 gold with ill-formed and hyphenated predictions. conlleval.pl (2004-01-26) on these
# lines reports 6 gold phrases, 5 found, 3 correct, accuracy 5/9, and per type
# (gold, found, correct): LOC 1 1 0, MISC-X 1 1 0, ORG 2 1 1, PER 2 2 2.
GOLD = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"], ["I-MISC-X", "I-ORG", "O", "B-ORG"]]
PREDICTED = [["B-PER", "I-PER", "B-PER", "I-LOC", "I-LOC"], ["I-MISC-X", "I-MISC-X", "O", "I-ORG"]]


def seqeval_scores(gold, predicted):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # seqeval warns where a type has no predictions
        overall = precision_recall_fscore_support(gold, predicted, average="micro")
        report = classification_report(gold, predicted, output_dict=True)
    per_type = {name: (v["precision"], v["recall"], v["f1-score"], v["support"])
                for name, v in report.items() if not name.endswith(" avg")}
    return overall[:3], per_type


class NerMetricsTest(tf.test.TestCase, parameterized.TestCase):

    def test_hand_computed_scores(self):
        gold = [["B-PER", "I-PER", "O", "B-LOC"], ["B-ORG", "O"]]
        predicted = [["B-PER", "I-PER", "O", "B-ORG"], ["B-ORG", "O"]]
        scores = entity_scores(gold, predicted)
        self.assertEqual((scores["support"], scores["predicted"], scores["correct"]), (3, 3, 2))
        self.assertAllClose((scores["precision"], scores["recall"]), (2 / 3, 2 / 3),
                            rtol=1e-6, atol=1e-12)
        self.assertAllClose(scores["f1"], 2 / 3, rtol=1e-6, atol=1e-12)
        self.assertAllClose(scores["per_type"], {
            "LOC": {"precision": 0.0, "recall": 0.0, "f1": 0.0, "support": 1},
            "ORG": {"precision": 0.5, "recall": 1.0, "f1": 2 / 3, "support": 1},
            "PER": {"precision": 1.0, "recall": 1.0, "f1": 1.0, "support": 1}},
                            rtol=1e-6, atol=1e-12)
        self.assertAllClose(token_accuracy(gold, predicted), 5 / 6, rtol=1e-6, atol=1e-12)

    @parameterized.parameters("IOB1", "IOB2")
    def test_conlleval_counts_on_iob1_and_ill_formed_tags(self, scheme):
        scores = entity_scores(GOLD, PREDICTED, scheme=scheme)
        self.assertEqual((scores["support"], scores["predicted"], scores["correct"]), (6, 5, 3))
        self.assertAllClose((scores["precision"], scores["recall"]), (0.6, 0.5),
                            rtol=1e-6, atol=1e-12)
        self.assertAllClose(scores["f1"], 6 / 11, rtol=1e-6, atol=1e-12)
        per_type = {name: (v["support"], v["precision"], v["recall"])
                    for name, v in scores["per_type"].items()}
        self.assertEqual(per_type, {"LOC": (1, 0.0, 0.0), "MISC-X": (1, 0.0, 0.0),
                                    "ORG": (2, 1.0, 0.5), "PER": (2, 1.0, 1.0)})
        self.assertAllClose(token_accuracy(GOLD, PREDICTED), 5 / 9, rtol=1e-6, atol=1e-12)

    def test_iob1_gold_against_iob2_predictions_of_the_same_entities(self):
        gold = [["I-PER", "I-PER", "B-PER", "O", "I-LOC"]]
        predicted = [["B-PER", "I-PER", "B-PER", "O", "B-LOC"]]
        self.assertEqual(entity_scores(gold, predicted, scheme="IOB1")["f1"], 1.0)
        self.assertAllClose(token_accuracy(gold, predicted), 3 / 5, rtol=1e-6, atol=1e-12)

    def test_parity_with_seqeval_default_mode_on_random_sequences(self):
        tags = ["O", "O", "O", "B-PER", "I-PER", "B-LOC", "I-LOC", "B-MISC-X", "I-MISC-X"]
        rng = random.Random(7)
        for _ in range(200):
            gold = [[rng.choice(tags) for _ in range(rng.randint(1, 10))]
                    for _ in range(rng.randint(1, 5))]
            predicted = [[tag if rng.random() < 0.6 else rng.choice(tags) for tag in sentence]
                         for sentence in gold]
            (precision, recall, f1), per_type = seqeval_scores(gold, predicted)
            for scheme in ("IOB1", "IOB2"):
                scores = entity_scores(gold, predicted, scheme=scheme)
                self.assertAllClose((scores["precision"], scores["recall"], scores["f1"]),
                                    (precision, recall, f1), rtol=1e-6, atol=1e-12)
                self.assertEqual(scores["per_type"].keys(), per_type.keys())
                for name, v in scores["per_type"].items():
                    self.assertAllClose((v["precision"], v["recall"], v["f1"], v["support"]),
                                        per_type[name], rtol=1e-6, atol=1e-12)

    def test_no_entities_scores_zero(self):
        scores = entity_scores([["O", "O"]], [["O", "O"]])
        self.assertEqual((scores["precision"], scores["recall"], scores["f1"], scores["per_type"]),
                         (
            0.0, 0.0, 0.0, {}))

    def test_bad_inputs(self):
        with self.assertRaisesRegex(ValueError, "2 gold sentences but 1 predicted"):
            entity_scores([["O"], ["O"]], [["O"]])
        with self.assertRaisesRegex(ValueError, "sentence 1: 1 gold tags but 2 predicted"):
            entity_scores([["O"], ["O"]], [["O"], ["O", "O"]])
        with self.assertRaisesRegex(ValueError, "sentence 0: 2 gold tags but 1 predicted"):
            token_accuracy([["O", "O"]], [["O"]])
        with self.assertRaisesRegex(ValueError, "predicted sentence 0, word 1: tag 'E-PER'"):
            entity_scores([["B-PER", "I-PER"]], [["B-PER", "E-PER"]])
        with self.assertRaisesRegex(ValueError, "scheme must be one of IOB1, IOB2"):
            entity_scores([["O"]], [["O"]], scheme="BIOES")


if __name__ == "__main__":
    tf.test.main()
