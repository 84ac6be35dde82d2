"""The driver's sweep over the feature-based tagger: Keras `fit` runs, a non-finite loss a row."""

import contextlib
import csv
import io
import os
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf

from core.arguments import FieldError
from tasks.driver import sweep
from tasks.tagging import FeatureTagging, Split, TaggingData, TaggingTask
from tests.fixtures import TestCase, event_scalars
from training.configs import OptimizationConfig, TrainingConfig
from training.divergence import TrainingDiverged

pytestmark = pytest.mark.slow  # two Keras fits of a BiLSTM


class FeatureSweepTest(TestCase):

    def _hooks(self, features: np.ndarray, rates=(1e-2, 3e-2), log_every=100) -> FeatureTagging:
        output_dir = str(self.tmp_path())
        task = TaggingTask(output_dir, mode="feature_based", do_train=True, do_eval=True,
                           lstm_units=4, learning_rates=rates)
        hooks = FeatureTagging(task, None, TrainingConfig(output_dir, max_seq_length=8,
                                                          train_batch_size=4,
                                                          log_every=log_every),
                               tf.distribute.get_strategy())
        count = len(features)
        arrays = {"input_mask": np.ones((count, 8), np.int32),
                  "label_ids": np.arange(count * 8).reshape(count, 8) % 3}
        hooks.data = TaggingData(["O", "B-PER", "I-PER"], "IOB2",
                                 {"train": Split("train", [], [], arrays)}, {"train": features})
        return hooks

    @pytest.mark.long
    def test_a_run_whose_loss_turns_non_finite_is_a_diverged_row(self):
        features = np.random.default_rng(0).normal(size=(8, 8, 6)).astype(np.float32)
        features[3, 2, 1] = np.nan  # one bad feature value: every run's loss is NaN
        hooks = self._hooks(features)
        table = os.path.join(hooks.training.output_dir, "sweep_results.tsv")
        with self.assertRaisesRegex(FieldError, "^every run of the sweep diverged: 0.01 "
                                                r"\(restart 0\) diverged at step \d+, 0.03 "
                                                rf"\(restart 0\) diverged at step \d+; see {table} "
                                                "and pass lower learning_rates$"):
            sweep(hooks, OptimizationConfig(num_train_epochs=2))
        with open(table, encoding="utf-8") as reader:
            rows = list(csv.DictReader(reader, delimiter="\t"))
        self.assertEqual([(row["learning_rate"], row["dev_score"], row["chosen"])
                          for row in rows], [("0.01", "nan", ""), ("0.03", "nan", "")])


    def test_training_shows_progress_lines_and_logs_its_loss_to_tensorboard(self):
        features = np.random.default_rng(0).normal(size=(8, 8, 6)).astype(np.float32)
        hooks = self._hooks(features, rates=(1e-2,), log_every=3)
        output_dir = hooks.training.output_dir
        shown = io.StringIO()
        with contextlib.redirect_stderr(shown):  # 2 epochs of 2 batches: a line at 3 and 4
            steps = hooks.train(hooks.build_model(), OptimizationConfig(
                learning_rate=1e-2, num_train_epochs=2), seed=0, output_dir=output_dir)
        self.assertEqual(steps, 4)
        self.assertRegex(shown.getvalue(), r"step 3/4 .* examples/s .*loss=")
        self.assertRegex(shown.getvalue(), r"step 4/4 .*ETA 0:00:00")
        scalars = event_scalars(Path(output_dir) / "logs" / "train")
        self.assertEqual([step for step, _ in scalars["loss"]], [3, 4])
        self.assertTrue(all(np.isfinite(value) for _, value in scalars["loss"]))
        self.assertAllClose([value for _, value in scalars["learning_rate"]], [1e-2, 1e-2])

    def test_a_lone_run_that_diverges_says_where_in_a_sentence(self):
        features = np.random.default_rng(0).normal(size=(8, 8, 6)).astype(np.float32)
        features[5, 2, 1] = np.nan  # the second batch of four
        hooks = self._hooks(features, rates=(1e-2,))
        with self.assertRaises(TrainingDiverged) as caught:
            sweep(hooks, OptimizationConfig(num_train_epochs=2))
        self.assertIn(caught.exception.step, (1, 2))  # the batches are shuffled
        self.assertIsNone(caught.exception.last_good_checkpoint)
        self.assertEqual(str(caught.exception),
                         f"training diverged at step {caught.exception.step}: loss=nan; no "
                         "checkpoint was written before it; lower the learning rate (or check "
                         "the input data) and rerun")


if __name__ == "__main__":
    tf.test.main()
