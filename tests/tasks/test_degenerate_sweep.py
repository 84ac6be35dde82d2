"""A sweep's degenerate runs are logged and marked in sweep_results.tsv (no training needed)."""

import csv
import math

import numpy as np
import tensorflow as tf

from tasks.classification import Classification, ClassificationData
from tasks.driver import SweepRun, flag_degenerate_runs, majority_scores, write_sweep_table


def finished(rate: float, restart: int, accuracy: float) -> SweepRun:
    return SweepRun(rate, restart, accuracy, {"eval_accuracy": accuracy}, "finished")


def dev_majorities(data: ClassificationData) -> dict[str, float]:
    hooks = Classification(task=None, resolved=None, training=None, strategy=None)
    hooks.data = data
    return hooks.majorities()


def data_with_dev(**label_ids) -> ClassificationData:
    dev = {name: ({"label_ids": np.array(labels)}, []) for name, labels in label_ids.items()}
    return ClassificationData(name="SST-2", kind="classification", labels=["0", "1"], pair=False,
                              train=None, train_examples=[], dev=dev, test={})


class DegenerateSweepTest(tf.test.TestCase):

    def test_majorities_are_keyed_like_the_scores(self):
        self.assertAllClose(dev_majorities(data_with_dev(dev=[0, 1, 0, 0])),
                            {"eval_accuracy": 0.75})
        self.assertAllClose(
            dev_majorities(data_with_dev(dev_matched=[0, 1, 2], dev_mismatched=[1, 1, 2])),
            {"dev_matched_accuracy": 1 / 3, "dev_mismatched_accuracy": 2 / 3})
        regression = data_with_dev(dev=[0.5, 1.0])
        regression.kind = "regression"
        self.assertEqual(dev_majorities(regression), {})

    def test_degenerate_runs_are_logged_and_marked_in_the_table(self):
        runs = [finished(5e-5, 0, 0.819), finished(5e-5, 1, 0.746), finished(3e-5, 0, 0.52),
                finished(3e-5, 1, 0.81),
                SweepRun(1e-3, 0, math.nan, {}, "diverged at step 7")]
        with self.assertLogs("absl", level="WARNING") as logs:
            flag_degenerate_runs(runs, {"eval_accuracy": 0.516})
        self.assertLen(logs.output, 2)
        self.assertIn("learning rate 5e-05, restart 1: dev score 0.7460, degenerate: 7.3 points "
                      "below the sweep's best run (dev score 74.6 vs 81.9)", logs.output[0])
        self.assertIn("learning rate 3e-05, restart 0: dev score 0.5200, degenerate: near "
                      "majority class (eval_accuracy 52.0%, majority class 51.6%)",
                      logs.output[1])

        output = self.get_temp_dir()
        write_sweep_table(output, runs, runs[0])
        with open(f"{output}/sweep_results.tsv", encoding="utf-8") as reader:
            table = list(csv.DictReader(reader, delimiter="\t"))
        self.assertEqual([row["warning"] for row in table], [
            "", "degenerate: 7.3 points below the sweep's best run (dev score 74.6 vs 81.9)",
            "degenerate: near majority class (eval_accuracy 52.0%, majority class 51.6%); 29.9 "
            "points below the sweep's best run (dev score 52.0 vs 81.9)", "", ""])
        self.assertEqual([row["status"] for row in table], ["finished"] * 4 + [
            "diverged at step 7"])
        self.assertEqual([row["chosen"] for row in table], ["*", "", "", "", ""])

    def test_a_sane_sweep_logs_no_warning(self):
        runs = [finished(5e-5, 0, 0.819), finished(5e-5, 1, 0.81)]
        with self.assertNoLogs("absl", level="WARNING"):
            flag_degenerate_runs(runs, {"eval_accuracy": 0.516})
        self.assertEqual([r.warning for r in runs], ["", ""])

    def test_a_model_at_the_majority_class_says_so_in_its_results_and_log(self):
        with self.assertLogs("absl", level="WARNING") as logs:
            fields = majority_scores({"eval_accuracy": 0.684, "eval_f1": 0.812},
                                     {"eval_accuracy": 0.684})
        self.assertEqual(fields, {"eval_majority_class_accuracy": 0.684,
                                  "eval_near_majority_class": 1.0})
        self.assertIn("eval: accuracy 68.4% is within 1 point of always predicting the majority "
                      "class (68.4%)", logs.output[0])
        with self.assertNoLogs("absl", level="WARNING"):
            self.assertEqual(majority_scores({"eval_accuracy": 0.8}, {"eval_accuracy": 0.684}),
                             {"eval_majority_class_accuracy": 0.684,
                              "eval_near_majority_class": 0.0})


if __name__ == "__main__":
    tf.test.main()
