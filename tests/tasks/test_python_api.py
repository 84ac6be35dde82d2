"""Training through the Python API alone: configs and task functions, no absl flags.

absl's FLAGS stay unparsed here, so any library code that read a flag would
raise instead of training.
"""

import keras
import numpy as np
import pytest
from absl import flags

from evaluation.results import read_eval_results
from modeling.config import BertConfig
from modeling.pretrainer import BertPretrainer
from tasks import classification, pretraining
from tests.fixtures import write_pretraining_records, write_tiny_config
from training.configs import ModelFiles, OptimizationConfig, RunConfig

GOOD = ["a great and wonderful film", "truly great acting", "wonderful and moving story",
        "great fun", "a wonderful cast"]
BAD = ["a dull and boring film", "truly awful acting", "boring and tedious story",
       "awful mess", "a dull cast"]


@pytest.fixture(autouse=True)
def no_parsed_flags():
    assert not flags.FLAGS.is_parsed()


def test_tiny_classifier_trains_and_writes_its_outputs(tmp_path):
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

    files = ModelFiles(str(tmp_path / "bert_config.json"), str(tmp_path / "vocab.txt"))
    run = RunConfig(str(tmp_path / "out"), max_seq_length=16, train_batch_size=8)
    task = classification.ClassificationTask(
        task_name="tsv", data_dir=str(data), do_train=True, do_eval=True,
        tsv_text_a_column="sentence", tsv_label_column="label", export_saved_model=False)
    _, results = classification.run(task, files, run,
                                    OptimizationConfig(learning_rate=2e-3, num_train_epochs=8))

    assert results["eval_accuracy"] >= 0.9, results
    assert read_eval_results(tmp_path / "out" / "eval_results.txt") == pytest.approx(results)
    assert (tmp_path / "out" / "model.ckpt.index").exists()
    assert (tmp_path / "out" / "checkpoints" / "checkpoint").exists()


def test_config_refuses_what_the_flags_refuse(tmp_path):
    with pytest.raises(ValueError, match="--learning_rate must be positive, got 0"):
        OptimizationConfig(learning_rate=0)
    with pytest.raises(ValueError, match="--train_batch_size must be positive"):
        RunConfig(str(tmp_path), train_batch_size=0)
    with pytest.raises(ValueError, match="--max_predictions_per_seq cannot exceed"):
        pretraining.check(ModelFiles("config.json"), RunConfig(str(tmp_path), max_seq_length=8),
                          pretraining.PretrainingData("records", max_predictions_per_seq=9))


def test_tiny_pretraining_changes_the_weights_and_evaluates(tmp_path):
    records = write_pretraining_records(tmp_path / "train.tfrecord", 48)
    config_file = write_tiny_config(tmp_path / "bert_config.json")
    run = RunConfig(str(tmp_path / "out"), max_seq_length=32, train_batch_size=8,
                    save_checkpoints_steps=3, log_every=3, iterations_per_loop=1,
                    random_seed=7)
    data = pretraining.PretrainingData(str(records), max_predictions_per_seq=5,
                                       max_eval_steps=2, do_train=True, do_eval=True)
    model, results = pretraining.run(
        ModelFiles(str(config_file)), run,
        OptimizationConfig(learning_rate=1e-3, num_train_steps=6, num_warmup_steps=2), data)

    keras.utils.set_random_seed(7)  # the task seeds the same way before building its model
    initial = BertPretrainer(BertConfig.from_json_file(str(config_file)))
    moved = max(float(np.abs(a - b).max())
                for a, b in zip(model.get_weights(), initial.get_weights()))
    assert moved > 1e-4
    assert read_eval_results(tmp_path / "out" / "eval_results.txt")["global_step"] == 6
    assert np.isfinite(results["masked_lm_loss"])
    assert (tmp_path / "out" / "export" / "bert_model.ckpt.index").exists()

