"""run_classifier.py end to end on tiny files in the GLUE layouts: sweep, metrics, outputs."""

import os
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf

from evaluation.results import read_eval_results
from tests.fixtures import REPO, event_scalars, run_main, write_tiny_config
from tests.training.test_training_faults import checkpoint_values, run_killed

pytestmark = pytest.mark.slow

SCRIPT = os.path.join(REPO, "run_classifier.py")
GOOD = ["a great and wonderful film", "truly great acting", "wonderful and moving story",
        "great fun", "a wonderful cast"]
BAD = ["a dull and boring film", "truly awful acting", "boring and tedious story",
       "awful mess", "a dull cast"]


def _vocab(path, words):
    tokens = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", ".", ",", *sorted(set(words))]
    path.write_text("\n".join(tokens) + "\n")
    return len(tokens)


@pytest.fixture(scope="module")
def sst2(tmp_path_factory):
    folder = tmp_path_factory.mktemp("sst2")
    data = folder / "SST-2"
    data.mkdir()
    rows = [(text, 1) for text in GOOD] + [(text, 0) for text in BAD]
    train = "sentence\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows * 4)
    (data / "train.tsv").write_text(train)
    (data / "dev.tsv").write_text("sentence\tlabel\n" + "".join(f"{t}\t{l}\n" for t, l in rows))
    (data / "test.tsv").write_text("index\tsentence\n" + "".join(
        f"{i}\t{t}\n" for i, (t, _) in enumerate(rows)))
    words = " ".join(GOOD + BAD).split()
    size = _vocab(folder / "vocab.txt", words)
    write_tiny_config(folder / "bert_config.json", vocab_size=size)
    return folder


def _arguments(folder, output, task="SST-2", data_dir=None, **flags) -> dict:
    arguments = {"task_name": task, "data_dir": data_dir or folder / task,
                 "vocab_file": folder / "vocab.txt", "bert_config_file": folder /
                 "bert_config.json", "output_dir": output, "do_train": True, "do_eval": True,
                 "do_predict": True, "max_seq_length": 16, "train_batch_size": 8,
                 "num_train_epochs": 8, "learning_rate": 2e-3, "log_every": 100}
    arguments.update(flags)
    return arguments


def _run(folder, output, **flags):
    arguments = _arguments(folder, output, **flags)
    command = [sys.executable, SCRIPT] + [f"--{key}={value}" for key, value in arguments.items()]
    return subprocess.run(command, capture_output=True, text=True, timeout=600)


def _refused(folder, output, message, **flags) -> None:
    """The run stops, in-process, with the error its entry point prints."""
    with pytest.raises((ValueError, OSError), match=re.escape(message)):
        run_main("run_classifier.py", _arguments(folder, output, **flags))


def test_sst2_learns_and_writes_everything(sst2, tmp_path):
    result = _run(sst2, tmp_path, learning_rates="2e-3,1e-3")
    assert result.returncode == 0, result.stderr[-3000:]
    results = read_eval_results(tmp_path / "eval_results.txt")
    assert results["eval_accuracy"] >= 0.9
    table = (tmp_path / "sweep_results.tsv").read_text().splitlines()
    assert len(table) == 3 and sum(line.endswith("*") for line in table) == 1
    for run in ("lr0.002_restart0", "lr0.001_restart0"):  # each sweep run's dev scores
        scalars = event_scalars(tmp_path / "runs" / run / "logs" / "eval")
        assert set(scalars) == {"eval_accuracy", "eval_score"}
        assert scalars["eval_accuracy"][0][0] == event_scalars(
            tmp_path / "runs" / run / "logs" / "train")["loss"][-1][0]
    submission = (tmp_path / "submission" / "SST-2.tsv").read_text().splitlines()
    assert submission[0] == "index\tprediction" and len(submission) == 11
    assert {line.split("\t")[1] for line in submission[1:]} <= {"0", "1"}

    import tensorflow as tf
    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)

    served = tf.saved_model.load(str(tmp_path / "saved_model"))
    outputs = served.signatures["serving_default"](
        text_a=tf.constant(["a great and wonderful film", "a dull and boring film"]))
    probabilities = outputs["probabilities"].numpy()
    np.testing.assert_allclose(probabilities.sum(-1), 1.0, rtol=1e-5)
    assert [label.decode() for label in outputs["label"].numpy()] == ["1", "0"]


def _own_pairs(tmp_path) -> dict:
    """A headed TSV of (first, second, verdict) pairs, and the flags that read it."""
    data = tmp_path / "pairs"
    data.mkdir()
    rows = [(a, b, "same") for a, b in zip(GOOD, GOOD[1:] + GOOD[:1])] + \
           [(a, b, "different") for a, b in zip(GOOD, BAD)]
    text = "first\tsecond\tverdict\n" + "".join(f"{a}\t{b}\t{c}\n" for a, b, c in rows * 3)
    for name in ("train.tsv", "dev.tsv"):
        (data / name).write_text(text)
    return {"task": "tsv", "data_dir": data, "do_predict": False, "tsv_text_a_column": "first",
            "tsv_text_b_column": "second", "tsv_label_column": "verdict", "num_train_epochs": 2}


def test_own_tsv_pairs_regression_style_labels(sst2, tmp_path):
    result = _run(sst2, tmp_path / "out", **_own_pairs(tmp_path))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "eval_accuracy" in read_eval_results(tmp_path / "out" / "eval_results.txt")


def test_causal_pairs_in_both_orders_train_and_serve(sst2, tmp_path):
    pairs = {**_own_pairs(tmp_path), "causal": True, "both_orders": True}
    result = _run(sst2, tmp_path / "out", **pairs)
    assert result.returncode == 0, result.stderr[-3000:]
    assert "eval_accuracy" in read_eval_results(tmp_path / "out" / "eval_results.txt")

    import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)

    served = tf.saved_model.load(str(tmp_path / "out" / "saved_model"))
    assert "serve_single" not in served.signatures
    first, second = tf.constant(["great fun", "a dull cast"]), tf.constant(["truly great acting",
                                                                            "great fun"])
    forward = served.signatures["serving_default"](text_a=first, text_b=second)
    backward = served.signatures["serving_default"](text_a=second, text_b=first)
    # The orders are added: which text comes first does not matter.
    np.testing.assert_allclose(forward["probabilities"].numpy(),
                               backward["probabilities"].numpy(), atol=1e-5)

    _refused(sst2, tmp_path / "refused", "--both_orders", **{**pairs, "causal": False})
    _refused(sst2, tmp_path / "single", "need text pairs", causal=True, both_orders=True)
    assert not (tmp_path / "single" / "eval_results.txt").exists()


def test_causal_model_with_lm_loss_runs_then_transfers_its_first_block(sst2, tmp_path):
    result = _run(sst2, tmp_path / "first", causal=True, lm_aux_weight=0.5, num_train_epochs=1,
                  do_predict=False, export_saved_model=False)
    assert result.returncode == 0, result.stderr[-3000:]
    again = _run(sst2, tmp_path / "again", causal=True, num_train_epochs=1, do_predict=False,
                 export_saved_model=False, init_checkpoint=tmp_path / "first",
                 transfer_layers=1)
    assert again.returncode == 0, again.stderr[-3000:]
    # write_tiny_config has 2 blocks: the second block and the pooler stay random.
    assert "tensors above the transferred blocks left as initialized" in again.stderr


@pytest.mark.parametrize("flags, message", [
    ({"task_name": "nope"}, "nope"),
    ({"data_dir": "/nonexistent"}, "/nonexistent"),
    ({"max_seq_length": 1000}, "max_position_embeddings"),
])
def test_bad_inputs(sst2, tmp_path, flags, message):
    _refused(sst2, tmp_path, message, **flags)


def test_sweep_marks_a_diverged_run_and_chooses_a_sane_one(sst2, tmp_path):
    result = _run(sst2, tmp_path, learning_rates="2e-3,1e6", num_train_epochs=2,
                  do_predict=False, export_saved_model=False)
    assert result.returncode == 0, result.stderr[-3000:]
    header, *rows = [line.split("\t") for line in
                     (tmp_path / "sweep_results.tsv").read_text().splitlines()]
    table = {row[0]: dict(zip(header, row)) for row in rows}
    assert table["0.002"]["status"] == "finished" and table["0.002"]["chosen"] == "*"
    assert re.fullmatch(r"diverged at step \d+", table["1e+06"]["status"])
    assert table["1e+06"]["chosen"] == "" and table["1e+06"]["dev_score"] == "nan"
    results = read_eval_results(tmp_path / "eval_results.txt")
    assert np.isfinite(list(results.values())).all()


def test_sweep_where_every_run_diverges_fails(sst2, tmp_path):
    result = _run(sst2, tmp_path, learning_rates="1e6,2e6", num_train_epochs=2,
                  do_predict=False, export_saved_model=False)
    assert result.returncode == 1
    error = result.stderr.strip().splitlines()[-1]
    assert re.fullmatch(r"run_classifier\.py: error: every run of the sweep diverged: "
                        r"1e\+06 \(restart 0\) diverged at step \d+, 2e\+06 \(restart 0\) "
                        r"diverged at step \d+; see .*sweep_results\.tsv and pass lower "
                        r"--learning_rates", error), error
    assert not (tmp_path / "model.ckpt.index").exists()
    assert not (tmp_path / "eval_results.txt").exists()


def test_fine_tuning_killed_then_rerun_ends_bit_identical(sst2, tmp_path):
    flags = {"num_train_epochs": 2, "save_checkpoints_steps": 2, "do_predict": False,
             "export_saved_model": False}
    reference = _run(sst2, tmp_path / "reference", **flags)
    assert reference.returncode == 0, reference.stderr[-3000:]

    arguments = {"task_name": "SST-2", "data_dir": sst2 / "SST-2",
                 "vocab_file": sst2 / "vocab.txt", "bert_config_file": sst2 / "bert_config.json",
                 "output_dir": tmp_path / "resumed", "do_train": True, "do_eval": True,
                 "max_seq_length": 16, "train_batch_size": 8, "learning_rate": 2e-3,
                 "log_every": 100, **flags}
    run_killed(SCRIPT, "step", 5, [f"--{key}={value}" for key, value in arguments.items()])
    # Killed between the checkpoints of steps 4 and 6.
    assert tf.train.latest_checkpoint(str(tmp_path / "resumed" / "checkpoints")).endswith(
        "ckpt-4")
    resumed = _run(sst2, tmp_path / "resumed", **flags)
    assert resumed.returncode == 0, resumed.stderr[-3000:]

    expected = checkpoint_values(tmp_path / "reference" / "model.ckpt")
    actual = checkpoint_values(tmp_path / "resumed" / "model.ckpt")
    assert expected.keys() == actual.keys()
    assert all(np.array_equal(expected[name], actual[name]) for name in expected)
    assert ((tmp_path / "reference" / "eval_results.txt").read_text()
            == (tmp_path / "resumed" / "eval_results.txt").read_text())
