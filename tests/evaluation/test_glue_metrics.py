"""GLUE metrics against figures computed by hand, and the leaderboard's averaging."""

import math

import numpy as np
import tensorflow as tf
from absl.testing import parameterized

from evaluation.glue import (compute_metrics, evaluation_results, glue_average, glue_score,
                             multiple_choice_accuracy)

# A 2x2 table: TP = 3, FN = 2, FP = 1, TN = 2.
GOLD = [1, 1, 1, 1, 1, 0, 0, 0]
PREDICTED = [1, 1, 1, 0, 0, 1, 0, 0]


class GlueMetricsTest(tf.test.TestCase, parameterized.TestCase):

    def test_cola_matthews_correlation_by_hand(self):
        metrics = compute_metrics("CoLA", PREDICTED, GOLD)
        # (TP*TN - FP*FN) / sqrt((TP+FP)(TP+FN)(TN+FP)(TN+FN)) = (6 - 2) / sqrt(4*5*3*4)
        self.assertAllClose(metrics["matthews_correlation"], 4 / math.sqrt(240), rtol=1e-6, atol=1e-12)
        self.assertAllClose(metrics["accuracy"], 5 / 8, rtol=1e-6, atol=1e-12)
        self.assertAllClose(glue_score("cola", metrics), 4 / math.sqrt(240), rtol=1e-6, atol=1e-12)

    @parameterized.parameters("MRPC", "qqp")
    def test_f1_of_the_positive_class(self, task):
        metrics = compute_metrics(task, PREDICTED, GOLD)
        precision, recall = 3 / 4, 3 / 5
        self.assertAllClose(metrics, {"accuracy": 5 / 8,
                                      "f1": 2 * precision * recall / (precision + recall)},
                            rtol=1e-6, atol=1e-12)
        self.assertAllClose(glue_score(task, metrics), (5 / 8 + 2 / 3) / 2, rtol=1e-6, atol=1e-12)

    def test_f1_without_positive_predictions_is_zero(self):
        self.assertEqual(compute_metrics("mrpc", [0, 0], [1, 0])["f1"], 0.0)

    def test_stsb_pearson_spearman_and_their_mean(self):
        predicted, gold = [1.0, 2.0, 3.0, 10.0], [1.0, 3.0, 2.0, 4.0]
        metrics = compute_metrics("STS-B", np.array(predicted)[:, None], gold)
        # Deviations from the means (4 and 2.5): x = -3 -2 -1 6, y = -1.5 .5 -.5 1.5.
        pearson = 13 / math.sqrt(50 * 5)
        # Ranks equal the gold values and 1 2 3 4: deviations -1.5 -.5 .5 1.5 against y.
        spearman = 4 / 5
        self.assertAllClose(metrics, {"pearson": pearson, "spearmanr": spearman},
                            rtol=1e-6, atol=1e-12)
        self.assertAllClose(glue_score("stsb", metrics),
                            (pearson + spearman) / 2, rtol=1e-6, atol=1e-12)

    def test_accuracy_tasks_take_ids_or_scores(self):
        scores = [[0.2, 0.5, 0.3], [0.9, 0.05, 0.05], [0.1, 0.1, 0.8]]
        self.assertAllClose(compute_metrics("mnli", scores, [1, 0, 0]),
                            {"accuracy": 2 / 3}, rtol=1e-6, atol=1e-12)
        self.assertAllClose(compute_metrics("MNLI-mm", [1, 0, 2], [1, 0, 0])["accuracy"],
                            2 / 3, rtol=1e-6, atol=1e-12)
        for task in ("sst-2", "QNLI", "rte", "wnli", "tsv"):
            self.assertEqual(glue_score(task, compute_metrics(task, [0, 1, 1, 1], [0, 1, 0, 1])),
                             0.75)

    def test_diagnostic_uses_multiclass_matthews_correlation(self):
        gold = np.array([0, 0, 1, 1, 2, 2])
        predicted = np.array([0, 1, 1, 1, 2, 0])
        # R_K: covariance of the one-hot codings over the square root of their variances.
        x, y = np.eye(3)[predicted], np.eye(3)[gold]
        x, y = x - x.mean(0), y - y.mean(0)
        expected = (x * y).sum() / math.sqrt((x * x).sum() * (y * y).sum())
        metrics = compute_metrics("AX", predicted, gold)
        self.assertAllClose(metrics["matthews_correlation"], expected, rtol=1e-6, atol=1e-12)
        self.assertAllClose(glue_score("ax", metrics), expected, rtol=1e-6, atol=1e-12)

    def test_glue_average_reproduces_the_leaderboard_bert_large_score(self):
        metrics = {"CoLA": {"matthews_correlation": 60.5}, "SST-2": {"accuracy": 94.9},
                   "MRPC": {"f1": 89.3, "accuracy": 85.4}, "STS-B": {"pearson": 87.6,
                                                                     "spearmanr": 86.5},
                   "QQP": {"f1": 72.1, "accuracy": 89.3}, "MNLI-m": {"accuracy": 86.7},
                   "MNLI-mm": {"accuracy": 85.9}, "QNLI": {"accuracy": 92.7},
                   "RTE": {"accuracy": 70.1}, "WNLI": {"accuracy": 65.1}, "AX": {"matthews_correlation": 39.6}}
        scores = {task: glue_score(task, values) for task, values in metrics.items()}
        self.assertEqual(round(glue_average(scores), 1), 80.5)
        self.assertAllClose(glue_average({"rte": 0.5, "MNLI-m": 0.8, "MNLI-mm": 0.6}),
                            0.6, rtol=1e-6, atol=1e-12)

    def test_multiple_choice_accuracy_from_scores_or_choices(self):
        scores = [[0.1, 0.2, 0.6, 0.1], [0.7, 0.1, 0.1, 0.1], [0.0, 0.0, 0.1, 0.9]]
        self.assertAllClose(multiple_choice_accuracy(scores, [2, 1, 3]),
                            2 / 3, rtol=1e-6, atol=1e-12)
        self.assertAllClose(multiple_choice_accuracy([2, 0, 3], [2, 1, 3]),
                            2 / 3, rtol=1e-6, atol=1e-12)
        self.assertEqual(compute_metrics("swag", scores, [2, 0, 3]), {"accuracy": 1.0})

    def test_evaluation_results_under_the_names_users_know(self):
        logits = [[math.log(3.0), 0.0], [0.0, 0.0], [0.0, math.log(4.0)]]
        results = evaluation_results("MRPC", logits, [0, 1, 0])
        # Probabilities of the gold labels: 3/4, 1/2, 1/5; predictions 0, 0 (a tie), 1.
        loss = -(math.log(3 / 4) + math.log(1 / 2) + math.log(1 / 5)) / 3
        self.assertAllClose(results, {"eval_accuracy": 1 / 3, "eval_f1": 0.0, "eval_loss": loss,
                                      "eval_score": 1 / 6}, rtol=1e-6, atol=1e-12)
        cola = evaluation_results("cola", np.eye(2)[PREDICTED], GOLD, prefix="dev")
        self.assertEqual(sorted(cola), ["dev_accuracy", "dev_loss", "dev_matthews_correlation",
                                        "dev_score"])

    def test_evaluation_results_of_a_regression_take_the_squared_error(self):
        results = evaluation_results("STS-B", [[1.0], [2.0], [4.0]], [1.0, 3.0, 3.5])
        self.assertAllClose(results["eval_loss"], (0 + 1 + 0.25) / 3, rtol=1e-6, atol=1e-12)
        self.assertEqual(sorted(results), ["eval_loss", "eval_pearson", "eval_score",
                                           "eval_spearmanr"])

    def test_bad_inputs_are_clear_errors(self):
        with self.assertRaisesRegex(ValueError, "3 predictions for 2 labels"):
            compute_metrics("cola", [0, 1, 1], [0, 1])
        with self.assertRaisesRegex(ValueError, "no predictions or labels"):
            compute_metrics("rte", [], [])
        with self.assertRaisesRegex(ValueError, "no predictions or labels"):
            multiple_choice_accuracy([], [])
        with self.assertRaisesRegex(ValueError, "unknown task 'xnli'"):
            compute_metrics("xnli", [0], [0])
        with self.assertRaisesRegex(ValueError, "one score per example"):
            compute_metrics("sts-b", [[1.0, 2.0], [3.0, 4.0]], [1.0, 2.0])
        with self.assertRaisesRegex(ValueError, r"the loss needs logits \[N, K\], got shape \(2,\)"):
            evaluation_results("rte", [0, 1], [0, 1])
        with self.assertRaisesRegex(ValueError, "metrics lack f1"):
            glue_score("mrpc", {"accuracy": 0.8})
        with self.assertRaisesRegex(ValueError, "'swag' is not a GLUE task"):
            glue_average({"swag": 0.8})
        with self.assertRaisesRegex(ValueError, "no GLUE task scores"):
            glue_average({"AX": 0.3})


if __name__ == "__main__":
    tf.test.main()
