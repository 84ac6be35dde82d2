"""Training through the Python API alone: configs and the task contract, no absl flags.

absl's FLAGS are unparsed while each test runs, so any library code that
read a flag would raise instead of training. (tf.test.TestCase needs them
parsed for its temporary folders: setUp makes the folder first, and
tearDown gives the test case its flags back.)
"""

import keras
import numpy as np
import pytest
import tensorflow as tf
from absl import flags

from evaluation.results import read_eval_results
from modeling.pretrainer import BertPretrainer
from network.config import BertConfig
from tasks import classification, pretraining
from tasks.contract import run_task
from tasks.model_files import ModelFiles
from tests.fixtures import TestCase, write_pretraining_records, write_tiny_config
from training.configs import OptimizationConfig, TrainingConfig

GOOD = ["a great and wonderful film", "truly great acting", "wonderful and moving story",
        "great fun", "a wonderful cast"]
BAD = ["a dull and boring film", "truly awful acting", "boring and tedious story",
       "awful mess", "a dull cast"]


class PythonApiTest(TestCase):

    def setUp(self):
        super().setUp()
        self.folder = self.tmp_path()
        self.flags_were_parsed = flags.FLAGS.is_parsed()
        flags.FLAGS.unparse_flags()
        self.assertFalse(flags.FLAGS.is_parsed())

    def tearDown(self):
        if self.flags_were_parsed:
            flags.FLAGS.mark_as_parsed()
        super().tearDown()

    @pytest.mark.long
    def test_tiny_classifier_trains_and_writes_its_outputs(self):
        tmp_path = self.folder
        data = tmp_path / "data"
        data.mkdir()
        rows = "".join(f"{text}\t{label}\n" for label, texts in (("pos", GOOD), ("neg", BAD))
                       for text in texts)
        (data / "train.tsv").write_text("sentence\tlabel\n" + rows * 4)
        (data / "dev.tsv").write_text("sentence\tlabel\n" + rows)
        words = sorted(set(" ".join(GOOD + BAD).split()))
        (tmp_path / "vocab.txt").write_text("\n".join(
            ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *words]) + "\n")
        write_tiny_config(tmp_path / "bert_config.json", vocab_size=5 + len(words))

        model_files = ModelFiles(str(tmp_path / "bert_config.json"), str(tmp_path / "vocab.txt"))
        training = TrainingConfig(str(tmp_path / "out"), max_seq_length=16, train_batch_size=8)
        task = classification.ClassificationTask(
            task_name="tsv", data_dir=str(data), do_train=True, do_eval=True,
            tsv_text_a_column="sentence", tsv_label_column="label", export_saved_model=False)
        result = run_task(classification.TASK, task, model_files, training,
                          OptimizationConfig(learning_rate=2e-3, num_train_epochs=8))

        self.assertGreaterEqual(result.scores["eval_accuracy"], 0.9, result.scores)
        eval_results = tmp_path / "out" / "eval_results.txt"
        written = read_eval_results(eval_results)
        self.assertEqual(written.keys(), result.scores.keys())
        self.assertAllClose([written[key] for key in sorted(written)],
                            [result.scores[key] for key in sorted(written)])
        self.assertIn(str(eval_results), result.outputs)
        self.assertTrue((tmp_path / "out" / "model.ckpt.index").exists())
        self.assertTrue((tmp_path / "out" / "checkpoints" / "checkpoint").exists())

    def test_config_refuses_what_the_flags_refuse(self):
        # From Python, the fields by their own names; a command line writes them as flags.
        with self.assertRaisesRegex(ValueError,
                                    "^learning_rate must be a positive finite number, got 0$"):
            OptimizationConfig(learning_rate=0)
        with self.assertRaisesRegex(ValueError, "^train_batch_size must be a positive integer"):
            TrainingConfig(str(self.folder), train_batch_size=0)
        with self.assertRaisesRegex(ValueError, "^max_predictions_per_seq cannot exceed "
                                                "max_seq_length"):
            pretraining.TASK.prepare(
                pretraining.PretrainingTask("records", max_predictions_per_seq=9),
                ModelFiles("config.json"), TrainingConfig(str(self.folder), max_seq_length=8),
                OptimizationConfig())

    @pytest.mark.long
    def test_tiny_pretraining_changes_the_weights_and_evaluates(self):
        tmp_path = self.folder
        records = write_pretraining_records(tmp_path / "train.tfrecord", 48)
        config_file = write_tiny_config(tmp_path / "bert_config.json")
        training = TrainingConfig(str(tmp_path / "out"), max_seq_length=32, train_batch_size=8,
                                  save_checkpoints_steps=3, log_every=3, iterations_per_loop=1,
                                  random_seed=7)
        task = pretraining.PretrainingTask(str(records), max_predictions_per_seq=5,
                                           max_eval_steps=2, do_train=True, do_eval=True)
        result = run_task(
            pretraining.TASK, task, ModelFiles(str(config_file)), training,
            OptimizationConfig(learning_rate=1e-3, num_train_steps=6, num_warmup_steps=2))

        keras.utils.set_random_seed(7)  # the task seeds the same way before building its model
        initial = BertPretrainer(BertConfig.from_json_file(str(config_file)))
        moved = max(float(np.abs(a - b).max())
                    for a, b in zip(result.model.get_weights(), initial.get_weights()))
        self.assertGreater(moved, 1e-4)
        self.assertEqual(read_eval_results(tmp_path / "out" / "eval_results.txt")["global_step"],
                         6)
        self.assertTrue(np.isfinite(result.scores["masked_lm_loss"]))
        self.assertTrue((tmp_path / "out" / "export" / "bert_model.ckpt.index").exists())


if __name__ == "__main__":
    tf.test.main()
