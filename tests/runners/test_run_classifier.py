"""run_classifier.py end to end on tiny files in the GLUE layouts: sweep, metrics, outputs."""

import os
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import tensorflow as tf
from absl import logging as absl_logging
from absl.testing import parameterized

from evaluation.results import read_eval_results
from tests.fixtures import REPO, TestCase, event_scalars, run_main, write_tiny_config
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


def _sst2(folder: Path) -> Path:
    """SST-2's files, a vocabulary and a tiny config under `folder`."""
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


class Sst2FolderTestCase(TestCase):
    """Tests reading SST-2's tiny files, vocabulary and config from `cls.sst2`."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.root = cls.class_folder()
        cls.sst2 = _sst2(cls.root)


class RunClassifierTest(Sst2FolderTestCase, parameterized.TestCase):

    def _assert_succeeded(self, result: subprocess.CompletedProcess) -> None:
        self.assertEqual(result.returncode, 0, result.stderr[-3000:])

    def _refused(self, output, message, **flags) -> None:
        """The run stops, in-process, with the error its entry point prints."""
        with self.assertRaisesRegex((ValueError, OSError), re.escape(message)):
            run_main("run_classifier.py", _arguments(self.sst2, output, **flags))

    def test_sst2_learns_and_writes_everything(self):
        sst2, tmp_path = self.sst2, self.tmp_path()
        # absl's INFO lines whatever verbosity an earlier in-process run left behind
        self.addCleanup(absl_logging.set_verbosity, absl_logging.get_verbosity())
        absl_logging.set_verbosity(absl_logging.INFO)
        with self.assertLogs(level="INFO") as logs:  # no XLA: the fixed-seed run compiles
            run_main("run_classifier.py", _arguments(sst2, tmp_path, jit_compile=False))
        counts = [line for line in logs.output if " examples" in line]
        self.assertRegex(counts[0], r"train\.tsv: read \d+ examples, skipped 0 rows")
        self.assertTrue(any(re.search(r"train: \d+ examples, \d+ of them truncated to \d+ tokens",
                                      line) for line in counts), counts)
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertGreaterEqual(results["eval_accuracy"], 0.9)
        self.assertBetween(results["eval_majority_class_accuracy"], 0.5, 0.8)
        self.assertEqual(results["eval_near_majority_class"], 0.0)
        self.assertGreater(results["eval_loss"], 0.0)
        table = (tmp_path / "sweep_results.tsv").read_text().splitlines()
        self.assertLen(table, 2)  # a lone run is a sweep of one, trained in the folder itself
        self.assertEndsWith(table[1], "*")
        self.assertFalse((tmp_path / "runs").exists())
        scalars = event_scalars(tmp_path / "logs" / "eval")
        self.assertEqual(set(scalars), {"eval_accuracy", "eval_loss", "eval_score"})
        self.assertEqual(scalars["eval_accuracy"][-1][0], event_scalars(
            tmp_path / "logs" / "train")["loss"][-1][0])
        submission = (tmp_path / "submission" / "SST-2.tsv").read_text().splitlines()
        self.assertEqual(submission[0], "index\tprediction")
        self.assertLen(submission, 11)
        self.assertContainsSubset({line.split("\t")[1] for line in submission[1:]}, {"0", "1"})

        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)

        served = tf.saved_model.load(str(tmp_path / "saved_model"))
        outputs = served.signatures["serving_default"](
            text_a=tf.constant(["a great and wonderful film", "a dull and boring film"]))
        probabilities = outputs["probabilities"].numpy()
        self.assertAllClose(probabilities.sum(-1), np.ones(2), rtol=1e-5, atol=0)
        self.assertEqual([label.decode() for label in outputs["label"].numpy()], ["1", "0"])

    @pytest.mark.long
    def test_own_tsv_pairs_regression_style_labels(self):
        tmp_path = self.tmp_path()
        run_main("run_classifier.py", _arguments(self.sst2, tmp_path / "out",
                                                 **_own_pairs(tmp_path)))
        self.assertIn("eval_accuracy", read_eval_results(tmp_path / "out" / "eval_results.txt"))

    @pytest.mark.long
    def test_causal_pairs_in_both_orders_train_and_serve(self):
        tmp_path = self.tmp_path()
        pairs = {**_own_pairs(tmp_path), "causal": True, "both_orders": True}
        run_main("run_classifier.py", _arguments(self.sst2, tmp_path / "out", **pairs))
        self.assertIn("eval_accuracy", read_eval_results(tmp_path / "out" / "eval_results.txt"))

        import tensorflow_text  # noqa: F401  (registers the tokenizer's ops for loading)

        served = tf.saved_model.load(str(tmp_path / "out" / "saved_model"))
        self.assertNotIn("serve_single", served.signatures)
        first = tf.constant(["great fun", "a dull cast"])
        second = tf.constant(["truly great acting", "great fun"])
        forward = served.signatures["serving_default"](text_a=first, text_b=second)
        backward = served.signatures["serving_default"](text_a=second, text_b=first)
        # The orders are added: which text comes first does not matter.
        self.assertAllClose(forward["probabilities"].numpy(), backward["probabilities"].numpy(),
                            rtol=1e-7, atol=1e-5)

        self._refused(tmp_path / "refused", "both_orders is GPT's similarity input",
                      **{**pairs, "causal": False})
        self._refused(tmp_path / "single", "need text pairs", causal=True, both_orders=True)
        self.assertFalse((tmp_path / "single" / "eval_results.txt").exists())

    @pytest.mark.long
    def test_causal_model_with_lm_loss_runs_then_transfers_its_first_block(self):
        tmp_path = self.tmp_path()
        run_main("run_classifier.py", _arguments(
            self.sst2, tmp_path / "first", causal=True, lm_aux_weight=0.5, num_train_epochs=1,
            do_predict=False, export_saved_model=False))
        again = _run(self.sst2, tmp_path / "again", causal=True, num_train_epochs=1,
                     do_predict=False, export_saved_model=False,
                     init_checkpoint=tmp_path / "first", transfer_layers=1)
        self._assert_succeeded(again)
        # write_tiny_config has 2 blocks: the second block and the pooler stay random.
        self.assertIn("tensors above the transferred blocks left as initialized", again.stderr)

    @parameterized.parameters(
        ({"task_name": "nope"}, "nope"),
        ({"data_dir": "/nonexistent"}, "/nonexistent"),
        ({"max_seq_length": 1000}, "max_position_embeddings"),
    )
    def test_bad_inputs(self, flags, message):
        self._refused(self.tmp_path(), message, **flags)

    @pytest.mark.long
    def test_sweep_lists_every_run_and_keeps_the_best_on_dev(self):
        tmp_path = self.tmp_path()
        run_main("run_classifier.py", _arguments(
            self.sst2, tmp_path, learning_rates="2e-3,1e6", num_restarts=2, num_train_epochs=2,
            do_predict=False, export_saved_model=False, jit_compile=False))
        table, chosen = self.check_sweep(tmp_path, "0.002", "1e+06")
        results = read_eval_results(tmp_path / "eval_results.txt")
        self.assertEqual(f"{results['eval_accuracy']:.4f}", chosen["eval_accuracy"])
        for row in table[:2]:  # each run's dev scores at its last step, in its own folder
            run = tmp_path / "runs" / f"lr0.002_restart{row['restart']}"
            scalars = event_scalars(run / "logs" / "eval")
            self.assertEqual(f"{scalars['eval_accuracy'][-1][1]:.4f}", row["eval_accuracy"])
            self.assertEqual(scalars["eval_accuracy"][-1][0],
                             event_scalars(run / "logs" / "train")["loss"][-1][0])

    @pytest.mark.long
    def test_sweep_where_every_run_diverges_fails(self):
        tmp_path = self.tmp_path()
        with self.assertRaisesRegex(ValueError, r"\Aevery run of the sweep diverged: 1e\+06 "
                                                r"\(restart 0\) diverged at step \d+, 2e\+06 "
                                                r"\(restart 0\) diverged at step \d+; see "
                                                r".*sweep_results\.tsv and pass lower "
                                                r"--learning_rates\Z"):
            run_main("run_classifier.py", _arguments(
                self.sst2, tmp_path, learning_rates="1e6,2e6", num_train_epochs=2,
                do_predict=False, export_saved_model=False, jit_compile=False))
        self.assertFalse((tmp_path / "model.ckpt.index").exists())
        self.assertFalse((tmp_path / "eval_results.txt").exists())

    @pytest.mark.long
    def test_fine_tuning_killed_then_rerun_ends_bit_identical(self):
        sst2, tmp_path = self.sst2, self.tmp_path()
        flags = {"num_train_epochs": 2, "save_checkpoints_steps": 2, "do_predict": False,
                 "export_saved_model": False}
        reference = _run(sst2, tmp_path / "reference", **flags)
        self._assert_succeeded(reference)

        arguments = {"task_name": "SST-2", "data_dir": sst2 / "SST-2",
                     "vocab_file": sst2 / "vocab.txt",
                     "bert_config_file": sst2 / "bert_config.json",
                     "output_dir": tmp_path / "resumed", "do_train": True, "do_eval": True,
                     "max_seq_length": 16, "train_batch_size": 8, "learning_rate": 2e-3,
                     "log_every": 100, **flags}
        run_killed(SCRIPT, "step", 5, [f"--{key}={value}" for key, value in arguments.items()])
        # Killed between the checkpoints of steps 4 and 6.
        self.assertEndsWith(tf.train.latest_checkpoint(
            str(tmp_path / "resumed" / "checkpoints")), "ckpt-4")
        resumed = _run(sst2, tmp_path / "resumed", **flags)
        self._assert_succeeded(resumed)

        expected = checkpoint_values(tmp_path / "reference" / "model.ckpt")
        actual = checkpoint_values(tmp_path / "resumed" / "model.ckpt")
        self.assertEqual(expected.keys(), actual.keys())
        for name in expected:
            self.assertAllEqual(expected[name], actual[name], msg=name)
        self.assertEqual((tmp_path / "reference" / "eval_results.txt").read_text(),
                         (tmp_path / "resumed" / "eval_results.txt").read_text())


if __name__ == "__main__":
    tf.test.main()
